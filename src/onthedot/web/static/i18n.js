// The page's words in English, Traditional and Simplified Chinese.
//
// The language comes from the browser (navigator.languages) until the viewer picks one, which
// is remembered in localStorage. Static text in index.html carries data-i18n keys; everything
// the page builds asks t() when it builds.

export const LANGUAGES = ["en", "zh-Hant", "zh-Hans"];
const STORAGE_KEY = "onthedot.language";

const MESSAGES = {
  "page.title": ["onthedot · Tasks", "onthedot · 任務", "onthedot · 任务"],
  "skip": ["Skip to content", "跳至主要內容", "跳到主要内容"],
  "brand.tagline": ["scheduled tasks", "排程任務", "定时任务"],
  "nav.label": ["Sections", "頁面區段", "页面分区"],
  "nav.tasks": ["Tasks", "任務", "任务"],
  "nav.inbox": ["Inbox", "收件匣", "收件箱"],
  "nav.dead": ["Dead letters", "死信", "死信"],
  "nav.unread": ["{n} unread", "{n} 則未讀", "{n} 条未读"],
  "nav.deadCount": ["{n} failed", "{n} 個失敗", "{n} 个失败"],
  "language": ["Language", "語言", "语言"],
  "timezone.note": ["Times are in your timezone, {tz}.", "時間以你的時區顯示：{tz}。",
    "时间以你的时区显示：{tz}。"],
  "signout": ["Sign out", "登出", "退出登录"],

  "signin.title": ["Sign in", "登入", "登录"],
  "signin.text": [
    "This server needs an API token (create one with “onthedot token create --user NAME”). "
      + "The page keeps it in this tab only, until you sign out or close the tab.",
    "這個伺服器需要 API 權杖（用「onthedot token create --user 名稱」建立）。"
      + "頁面只把它存在這個分頁裡，登出或關閉分頁就會清除。",
    "这个服务器需要 API 令牌（用“onthedot token create --user 名称”创建）。"
      + "页面只把它保存在这个标签页里，退出登录或关闭标签页就会清除。"],
  "signin.token": ["API token", "API 權杖", "API 令牌"],
  "signin.submit": ["Sign in", "登入", "登录"],
  "signin.rejected": ["That token was not accepted.", "這個權杖不被接受。", "这个令牌不被接受。"],
  "signin.origin": [
    "Without a token, this server answers only pages opened at 127.0.0.1 or localhost. "
      + "Sign in with a token, or open the page at one of those addresses.",
    "沒有權杖時，這個伺服器只回應從 127.0.0.1 或 localhost 開啟的頁面。"
      + "請用權杖登入，或改從這兩個位址開啟頁面。",
    "没有令牌时，这个服务器只响应从 127.0.0.1 或 localhost 打开的页面。"
      + "请用令牌登录，或改从这两个地址打开页面。"],

  "new.title": ["New task", "新增任務", "新建任务"],
  "new.how": ["How to describe it", "描述方式", "描述方式"],
  "new.sentence": ["In one sentence", "用一句話", "用一句话"],
  "new.form": ["With a form", "用表單", "用表单"],
  "sentence.label": ["What to do, and when", "要做什麼、什麼時候", "要做什么、什么时候"],
  "sentence.hint": [
    "For example “every weekday at 9am remind me to stand up” or “每天早上八點幫我總結財經新聞”.",
    "例如「每天早上八點幫我總結財經新聞」或 “every weekday at 9am remind me to stand up”。",
    "例如“每天早上八点帮我总结财经新闻”或 “every weekday at 9am remind me to stand up”。"],
  "sentence.preview": ["Preview", "預覽", "预览"],
  "preview.title": ["Preview", "預覽", "预览"],
  "preview.when": ["When", "時間", "时间"],
  "preview.task": ["Task", "任務", "任务"],
  "preview.next": ["Next runs", "接下來的執行", "接下来的执行"],
  "preview.noTask": ["The sentence says when, but not what to do. Add it, then preview again.",
    "這句話說了時間，但沒說要做什麼。請補上後再預覽。",
    "这句话说了时间，但没说要做什么。请补上后再预览。"],
  "preview.stale": ["The sentence changed: preview it again.", "句子已變更，請重新預覽。",
    "句子已更改，请重新预览。"],
  "create": ["Create task", "建立任務", "创建任务"],
  "created": ["Created “{name}”.", "已建立「{name}」。", "已创建“{name}”。"],

  "form.name": ["Name (optional)", "名稱（選填）", "名称（可选）"],
  "form.type": ["Runs", "執行", "执行"],
  "type.immediate": ["right away", "立即", "立即"],
  "type.one-time": ["once", "一次", "一次"],
  "type.recurring": ["repeatedly", "重複", "重复"],
  "form.time": ["Date and time", "日期與時間", "日期和时间"],
  "form.schedule": ["Schedule (cron or RRULE)", "排程（cron 或 RRULE）", "计划（cron 或 RRULE）"],
  "form.schedule.hint": [
    "“0 8 * * *” is every day at 08:00; “RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0” "
      + "is every Monday at 09:00.",
    "「0 8 * * *」是每天 08:00；「RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0」是每週一 09:00。",
    "“0 8 * * *”是每天 08:00；“RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0”是每周一 09:00。"],
  "form.timezone": ["Timezone", "時區", "时区"],
  // A repeating task's overlap_policy (docs/schedules.md#overlapping-runs), in the user's words.
  "form.overlap": ["If a run is still going when the next one is due",
    "下一次到期時，若上一次還在執行", "下一次到期时，若上一次还在执行"],
  "overlap.skip": ["skip it (default)", "略過這一次（預設）", "跳过这一次（默认）"],
  "overlap.buffer_one": ["run it when the running one ends", "等執行中的那次結束後再執行",
    "等执行中的那次结束后再执行"],
  "overlap.allow_all": ["run it at its time, alongside", "照時間執行，兩次同時進行",
    "按时执行，两次同时进行"],
  "overlap.hint.skip": [
    "The run that came due is left out: the task next runs at its first time after the "
      + "running one ends.",
    "到期的那一次不執行：任務在執行中的那次結束後，從下一個排定時間起照常執行。",
    "到期的那一次不执行：任务在执行中的那次结束后，从下一个计划时间起照常执行。"],
  "overlap.hint.buffer_one": [
    "It runs as soon as the running one ends, so a little late. If several came due meanwhile, "
      + "only the latest one runs.",
    "它在執行中的那次結束後立刻執行，所以會晚一點。期間到期好幾次時，只執行最後一次。",
    "它在执行中的那次结束后立即执行，所以会晚一点。期间到期好几次时，只执行最后一次。"],
  "overlap.hint.allow_all": [
    "Every run starts at its time, even while earlier ones are still going, so runs can "
      + "overlap.",
    "每一次都照時間開始，即使前一次還在執行，所以可能同時有好幾次在執行。",
    "每一次都按时开始，即使前一次还在执行，所以可能同时有好几次在执行。"],
  // A non-default overlap policy, beside a task's schedule in the list.
  "overlap.tag.buffer_one": ["a run due while one runs waits for it", "執行中到期的一次會等它結束",
    "执行中到期的一次会等它结束"],
  "overlap.tag.allow_all": ["runs may overlap", "執行可能重疊", "执行可能重叠"],
  "details.overlap": ["If a run is still going", "若上一次還在執行", "若上一次还在执行"],
  "form.action": ["Action", "動作", "动作"],
  "action.message": ["store a message", "儲存一則訊息", "保存一条消息"],
  "action.webhook": ["call a webhook", "呼叫 webhook", "调用 webhook"],
  "action.news_digest": ["news digest", "新聞摘要", "新闻摘要"],
  // What a previewed task does (the action chosen from its words).
  "does.message": ["a reminder", "提醒", "提醒"],
  "does.news_digest": ["a news digest", "新聞摘要", "新闻摘要"],
  "does.prompt": ["carried out by the model", "由模型執行", "由模型执行"],
  "form.text": ["Message", "訊息", "消息"],
  "form.url": ["Webhook URL", "Webhook 網址", "Webhook 网址"],
  "form.topic": ["Topic", "主題", "主题"],
  "topic.finance": ["finance", "財經", "财经"],
  "topic.technology": ["technology", "科技", "科技"],
  "topic.world": ["world", "國際", "国际"],
  "form.digestLanguage": ["Digest language", "摘要語言", "摘要语言"],

  "list.title": ["Your tasks", "你的任務", "你的任务"],
  "filter.label": ["Status", "狀態", "状态"],
  "filter.all": ["all", "全部", "全部"],
  "list.caption": ["Your tasks, newest first", "你的任務，最新的在前", "你的任务，最新的在前"],
  "list.empty": ["No tasks yet: describe one above.", "還沒有任務，請在上方新增。",
    "还没有任务，请在上方新建。"],
  "list.emptyFiltered": ["No tasks with this status.", "沒有這個狀態的任務。",
    "没有这个状态的任务。"],
  "more": ["Show more", "顯示更多", "显示更多"],
  "col.name": ["Name", "名稱", "名称"],
  "col.schedule": ["Schedule", "排程", "计划"],
  "col.status": ["Status", "狀態", "状态"],
  "col.next": ["Next run", "下次執行", "下次执行"],
  "col.last": ["Last result", "上次結果", "上次结果"],
  "col.actions": ["Actions", "操作", "操作"],
  "status.scheduled": ["scheduled", "已排定", "已安排"],
  "status.running": ["running", "執行中", "执行中"],
  "status.completed": ["completed", "已完成", "已完成"],
  "status.failed": ["failed", "失敗", "失败"],
  "status.paused": ["paused", "已暫停", "已暂停"],
  "status.cancelled": ["deleted", "已刪除", "已删除"],
  "schedule.immediate": ["right away", "立即", "立即"],
  "schedule.once": ["once, {time}", "一次：{time}", "一次：{time}"],
  "schedule.zone": ["{words} ({tz})", "{words}（{tz}）", "{words}（{tz}）"],
  "none": ["—", "—", "—"],
  "act.open": ["Show runs", "查看執行紀錄", "查看执行记录"],
  "act.pause": ["Pause", "暫停", "暂停"],
  "act.resume": ["Resume", "繼續", "继续"],
  "act.run": ["Run now", "立即執行", "立即执行"],
  "act.skip-next": ["Skip next run", "跳過下一次", "跳过下一次"],
  "act.edit": ["Edit", "編輯", "编辑"],
  "edit.title": ["Edit “{name}”", "編輯「{name}」", "编辑“{name}”"],
  "edit.name": ["Name", "名稱", "名称"],
  "edit.prompt": ["Prompt", "提示", "提示"],
  "edit.channels": ["Results go to", "結果送往", "结果发往"],
  "edit.inbox": ["the inbox", "收件匣", "收件箱"],
  "edit.email": ["E-mail to (empty: none)", "寄到 e-mail（空白：不寄）", "发到 e-mail（空白：不发）"],
  "edit.hook": ["Webhook for results (empty: none)", "結果的 Webhook（空白：不送）",
    "结果的 Webhook（空白：不发）"],
  "edit.cancel": ["Cancel", "取消", "取消"],
  "edit.save": ["Save", "儲存", "保存"],
  "done.edit": ["Saved “{name}”.", "已儲存「{name}」。", "已保存“{name}”。"],
  "act.delete": ["Delete", "刪除", "删除"],
  "done.pause": ["Paused “{name}”.", "已暫停「{name}」。", "已暂停“{name}”。"],
  "done.resume": ["Resumed “{name}”.", "已繼續「{name}」。", "已继续“{name}”。"],
  "done.run": ["“{name}” will run now.", "「{name}」即將執行。", "“{name}”即将执行。"],
  "done.skip-next": ["Skipped the next run of “{name}”.", "已跳過「{name}」的下一次執行。",
    "已跳过“{name}”的下一次执行。"],
  "done.delete": ["Deleted “{name}”.", "已刪除「{name}」。", "已删除“{name}”。"],
  "confirm.delete": ["Delete “{name}”?", "要刪除「{name}」嗎？", "要删除“{name}”吗？"],
  "confirm.deleteText": ["It will not run again. Its run history stays readable.",
    "它不會再執行，執行紀錄仍然可以查看。", "它不会再执行，执行记录仍然可以查看。"],
  "confirm.keep": ["Keep it", "保留", "保留"],
  "finished": ["“{name}”: {status}.", "「{name}」：{status}。", "“{name}”：{status}。"],

  "details.title": ["Runs of “{name}”", "「{name}」的執行紀錄", "“{name}”的执行记录"],
  "details.close": ["Close", "關閉", "关闭"],
  "details.action": ["Action", "動作", "动作"],
  "details.notify": ["Results go to", "結果送往", "结果发往"],
  "details.nowhere": ["nowhere", "不傳送", "不发送"],
  "details.retry": ["Attempts allowed", "最多嘗試次數", "最多尝试次数"],
  "runs.empty": ["No runs yet.", "還沒有執行紀錄。", "还没有执行记录。"],
  "run.scheduled": ["Scheduled for", "排定時間", "计划时间"],
  "run.started": ["Started", "開始", "开始"],
  "run.finished": ["Finished", "結束", "结束"],
  "run.attempt": ["Attempt", "第幾次嘗試", "第几次尝试"],
  "run.manual": ["run now", "手動執行", "手动执行"],
  "run.output": ["Output", "輸出", "输出"],
  "run.error": ["Error", "錯誤", "错误"],
  "run.deliveries": ["Deliveries", "遞送", "投递"],
  "run.PENDING": ["waiting", "等待中", "等待中"],
  "run.ENQUEUED": ["queued", "已排入佇列", "已入队"],
  "run.RUNNING": ["running", "執行中", "执行中"],
  "run.RETRYING": ["retrying", "重試中", "重试中"],
  "run.SUCCEEDED": ["succeeded", "成功", "成功"],
  "run.FAILED": ["failed", "失敗", "失败"],
  "run.SKIPPED": ["skipped", "已略過", "已跳过"],
  "run.CANCELLED": ["cancelled", "已取消", "已取消"],
  "delivery.delivered": ["delivered", "已送達", "已送达"],
  "delivery.failed": ["failed for good", "已放棄", "已放弃"],
  "delivery.sending": ["sending", "傳送中", "发送中"],
  "delivery.retrying": ["retrying", "將重試", "将重试"],
  "delivery.next": ["next try", "下次重試", "下次重试"],

  "inbox.title": ["Inbox", "收件匣", "收件箱"],
  "inbox.intro": ["Results delivered to your inbox, unread first.",
    "送到收件匣的結果，未讀的在前。", "送到收件箱的结果，未读的在前。"],
  "inbox.unreadOnly": ["Unread only", "只看未讀", "只看未读"],
  "inbox.empty": ["Nothing here yet.", "這裡還沒有東西。", "这里还没有内容。"],
  "inbox.markRead": ["Mark read", "標為已讀", "标为已读"],
  "inbox.read": ["read", "已讀", "已读"],
  "inbox.unread": ["unread", "未讀", "未读"],
  "inbox.delivered": ["Delivered", "送達時間", "送达时间"],

  "dead.title": ["Dead letters", "死信", "死信"],
  "dead.intro": [
    "Runs that failed their last attempt. Redrive sends one back to the queue with a fresh "
      + "attempt count.",
    "最後一次嘗試也失敗的執行。重新投遞會把它送回佇列，並重新計算嘗試次數。",
    "最后一次尝试也失败的执行。重新投递会把它送回队列，并重新计算尝试次数。"],
  "dead.empty": ["No dead letters.", "沒有死信。", "没有死信。"],
  "dead.redrive": ["Redrive", "重新投遞", "重新投递"],
  "dead.redriven": ["Sent a run of “{name}” back to the queue.", "已把「{name}」的執行送回佇列。",
    "已把“{name}”的执行送回队列。"],

  "error.network": ["The server does not answer. Retrying…", "伺服器沒有回應，正在重試…",
    "服务器没有响应，正在重试…"],
  "error.expected": ["Expected: {expected}", "應為：{expected}", "应为：{expected}"],
};

let current = "en";

/** The first of the browser's languages the page speaks: zh-TW/HK/MO and zh-Hant read
 * Traditional, other Chinese reads Simplified. */
export function browserLanguage(tags = navigator.languages ?? [navigator.language]) {
  for (const raw of tags) {
    const tag = String(raw).toLowerCase();
    if (tag.startsWith("zh")) return /hant|-tw|-hk|-mo/.test(tag) ? "zh-Hant" : "zh-Hans";
    if (tag.startsWith("en")) return "en";
  }
  return "en";
}

export function initialLanguage() {
  let saved = null;
  try {
    saved = localStorage.getItem(STORAGE_KEY);
  } catch {
    // storage can be disabled; the browser's language still works
  }
  return LANGUAGES.includes(saved) ? saved : browserLanguage();
}

export function setLanguage(language, remember) {
  current = LANGUAGES.includes(language) ? language : "en";
  if (remember) {
    try {
      localStorage.setItem(STORAGE_KEY, current);
    } catch {
      // not remembered, still applied
    }
  }
  document.documentElement.lang = current;
  document.title = t("page.title");
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-label]")) {
    el.setAttribute("aria-label", t(el.dataset.i18nLabel));
  }
}

export function language() {
  return current;
}

/** t(key) when the page has words for it, else `fallback` (an action type it does not know). */
export function tOr(key, fallback) {
  return key in MESSAGES ? t(key) : fallback;
}

export function t(key, values = {}) {
  const entry = MESSAGES[key];
  const text = entry ? entry[LANGUAGES.indexOf(current)] : key;
  return text.replace(/\{(\w+)\}/g, (match, name) => (name in values ? String(values[name]) : match));
}
