"""Which of the user's tasks the words of a chat message name ("the water reminder",
"那個喝水提醒").

Pure functions. Words are compared, not sentences: English words (lower case, plural and
possessive endings dropped), and Chinese characters plus each pair of neighbouring characters
(so "喝水" matches "記得喝水" better than "喝咖啡"). Traditional and Simplified characters are
folded to one script first, so "运动提醒" finds a task named "每週運動". Words that say when or
that only say "a task" ("每週", "daily", "提醒", "reminder", "the") name nothing and are dropped
from both sides.

A task matches when at least half of the message's words are in its name or text
(``MIN_COVERAGE``); the best-covered tasks win, and among them a task named by exactly those
words ("call mom" over "call mom about the trip"). Several winners are a question for the
user, never a guess: "喝" names "喝水" and "喝咖啡" alike.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TypeVar

MIN_COVERAGE = 0.5  # share of the message's words a task must hold to count as named

T = TypeVar("T")

# Traditional -> Simplified, for the characters common in task names (a character missing here
# is compared as it is: the worst case is a task not found, and the user is told so).
_FOLD_PAIRS = (
    "點点 週周 個个 號号 後后 時时 鐘钟 禮礼 幫帮 請请 們们 這这 間间 與与 會会 開开 報报 總总 "
    "結结 財财 經经 聞闻 讀读 發发 電电 話话 記记 來来 過过 還还 對对 說说 從从 頭头 傳传 給给 "
    "讓让 買买 賣卖 單单 歲岁 達达 運运 動动 氣气 溫温 環环 線线 車车 應应 資资 訊讯 議议 準准 "
    "備备 隊队 級级 檢检 錢钱 銀银 寫写 認认 體体 醫医 藥药 療疗 學学 習习 種种 藝艺 術术 東东 "
    "樂乐 聽听 寶宝 貝贝 據据 壓压 兩两 嗎吗 麼么 煩烦 幾几 價价 見见 覺觉 歷历 鬧闹 際际 萬万 "
    "億亿 為为 爲为 隻只 數数 郵邮 節节 曆历 鍛锻 煉炼 澆浇 補补 喚唤 刪删 務务 飯饭 貓猫 寵宠 "
    "帳账 繳缴 費费 貸贷 燈灯 關关 門门 庫库 檔档 雲云 碼码 網网 頁页 載载 課课 書书 業业 練练 "
    "鋼钢 遊游 騎骑 腳脚 媽妈 親亲 慶庆 紀纪 約约 診诊 掛挂 維维 魚鱼 雞鸡 購购 訂订 閱阅 換换 "
    "機机 陽阳 臺台 颱台 風风 預预 匯汇 幣币 漲涨 國国 條条 標标 題题 專专 團团 餵喂 複复 試试 "
    "稅税 戶户 簽签 證证 護护 續续 險险 養养 場场 視视 頻频 聯联 絡络 繫系 係系 問问 覆复 復复 "
    "輸输 執执 轉转 啟启 暫暂 繼继 錄录 聲声 詞词 語语 譯译 編编 輯辑 設设 計计 畫画 劃划 規规 "
    "則则 測测 驗验 詢询 統统 顯显 項项 狀状 態态 況况 進进 實实 現现 熱热 涼凉 衛卫 廁厕 廚厨 "
    "廳厅 臥卧 樓楼 層层 鑰钥 錶表 鏡镜 髮发 臉脸 膚肤 歡欢 愛爱 兒儿 園园 師师 長长 導导 員员 "
    "廠厂 產产 貨货 遞递 筆笔 鎖锁 鐵铁 飛飞 館馆 紅红 綠绿 藍蓝 黃黄 圖图 夾夹 雜杂 誌志 紙纸 "
    "聖圣 誕诞 農农 陰阴 裡里 裏里 邊边 麵面 謝谢 錯错 難难 夢梦 驚惊 獎奖 勵励 績绩 稱称 讚赞 "
    "評评 論论 腦脑 軟软 倉仓 儲储 掃扫 塵尘 灑洒 濾滤 淨净 潔洁 髒脏 亂乱 齊齐 頓顿 確确 審审 "
    "覽览 觀观 賞赏 戲戏 劇剧 賽赛 籃篮 舉举 雙双 鬆松 乾干 幹干 響响 鐘钟 貼贴 廣广 擇择 許许 "
    "證证 織织 員员 際际 寢寝 襪袜 褲裤 藥药 餅饼 麥麦 湯汤 燒烧 蝦虾 豬猪 雜杂 葉叶 蘭兰 棗枣 "
    "鹽盐 醬酱 壺壶 盤盘 蓋盖 輛辆 艙舱 達达 遠远 區区 縣县 鄉乡 鎮镇 島岛 灣湾 橋桥 灘滩 濱滨 "
    "觸触 啟启 態态 階阶 級级 幣币 漢汉 華华 蘇苏 "
)
_FOLD = str.maketrans({pair[0]: pair[1] for pair in _FOLD_PAIRS.split() if len(pair) == 2})

_CJK = "\u3400-\u9fff\uf900-\ufaff"
# Said to name when a task runs, or that it is a task: no help in telling tasks apart.
_ZH_NOISE = re.compile(
    r"每(?:天|日|晚|早|週|周|星期|個月|个月|月|年|小時|小时|分鐘|分钟|隔)?|明天|今天|後天|后天|明早|明晚|"
    r"今晚|今早|早上|晚上|上午|下午|中午|凌晨|傍晚|半夜|工作日|平日|週末|周末|"
    r"[週周][一二三四五六日天]|星期[一二三四五六日天]?|禮拜[一二三四五六日天]?|"
    r"[0-9一二三四五六七八九十兩两半]+(?:點|点|時|时|分|號|号|月)|"
    r"提醒我|提醒|任務|任务|排程|鬧鐘|闹钟|通知|定時|定时|那個|那个|這個|这个|那些|這些|这些|所有|全部|"
    r"它|我的|我們|我们|幫我|帮我|記得|记得|叫我|一下|的|了|吧|呢|嗎|吗|我|你|把|將|将|都|也")
_EN_NOISE_WORDS = (
    "the a an my our your his her their this that these those it them one all of for to "
    "about me i you we us please task reminder job alarm notification remind reminding "
    "called named thing schedule scheduled daily weekly monthly yearly hourly tomorrow today "
    "tonight morning evening afternoon night noon midnight every each at on in am pm now "
    "again next weekday weekend monday tuesday wednesday thursday friday saturday sunday "
    "o'clock minute hour day week month year and or with from")
_EN_NOISE = frozenset(_EN_NOISE_WORDS.split())
_EN_TIME_WORD = re.compile(r"\d+(?:am|pm|h|st|nd|rd|th)?|\d+:\d+")  # "8am", "3rd", "10"
_WORD = re.compile(rf"[a-z0-9':]+|[{_CJK}]+")
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])")  # "喝 水" is "喝水"
JOINED = "+"  # marks, in task_words, two neighbouring words written as one ("+standup")
_TOPIC_WORDS = {  # a news digest is also named by its topic, in each language
    "finance": "finance financial money 財經 财经 金融",
    "technology": "tech technology 科技",
    "world": "world international 國際 国际",
}


def words(text: str) -> frozenset[str]:
    """The units two texts are compared by: English words, CJK characters and CJK pairs."""
    found: set[str] = set()
    for token in _tokens(text):
        if re.match(rf"[{_CJK}]", token):
            for run in _ZH_NOISE.split(token):
                found.update(run)
                found.update(run[i:i + 2] for i in range(len(run) - 1))
        else:
            word = _stem(token)
            if word and word not in _EN_NOISE and not _EN_TIME_WORD.fullmatch(word):
                found.add(word)
    return frozenset(found)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(_CJK_GAP.sub("", text.lower().translate(_FOLD)))


def _neighbours(text: str) -> list[tuple[str, str]]:
    """Each two neighbouring English words, noise words included ("check in": "in" names
    nothing alone, but "checkin" does)."""
    found = [_stem(t) for t in _tokens(text) if not re.match(rf"[{_CJK}]", t)]
    return list(itertools.pairwise(w for w in found if w))


def task_words(name: str, action: dict[str, object]) -> frozenset[str]:
    """What a task is called and what it does, as ``words``; plus each two neighbouring
    English words as one, marked ``JOINED`` ("+standup" for "stand up")."""
    parts = [name]
    for key in ("text", "prompt", "topic"):
        value = action.get(key)
        if isinstance(value, str):
            parts.append(value)
            parts.append(_TOPIC_WORDS.get(value, "") if key == "topic" else "")
    if action.get("type") == "news_digest":
        parts.append("news digest 新聞 新闻 摘要")
    joined = {JOINED + a + b for part in parts for a, b in _neighbours(part)}
    return words(" ".join(parts)) | joined


def coverage(wanted: frozenset[str], have: frozenset[str],
             neighbours: Sequence[tuple[str, str]] = ()) -> float:
    """The share of the message's words found in the task: as they are, written together in
    the task ("standup" in "stand up"), or two of them written as one there ("stand up" in
    "standup")."""
    if not wanted:
        return 0.0
    found = {w for w in wanted if w in have or JOINED + w in have}
    found.update(w for a, b in neighbours if a + b in have for w in (a, b))
    return len(found & wanted) / len(wanted)


def best_matches(target: str, tasks: Sequence[tuple[T, frozenset[str]]]) -> list[T]:
    """The tasks ``target`` names best, in the given order. Words that name nothing (empty
    target, "it", "那個提醒") leave every task a candidate."""
    wanted = words(target)
    if not wanted:
        return [task for task, _ in tasks]
    pairs = _neighbours(target)
    scored = [(task, have, coverage(wanted, have, pairs)) for task, have in tasks]
    scored = [entry for entry in scored if entry[2] >= MIN_COVERAGE]
    if not scored:
        return []
    top = max(share for _, _, share in scored)
    best = [(task, have) for task, have, share in scored if share == top]
    exact = [task for task, have in best
             if {w for w in have if not w.startswith(JOINED)} == wanted]
    return exact if len(exact) == 1 else [task for task, _ in best]


def _stem(word: str) -> str:
    word = word.strip("'")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"  # stories -> story
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]  # boxes -> box, watches -> watch
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word
