// A schedule in words: "every day at 08:00", "每天 08:00", "每月第一個週一 10:00".
//
// The same rules as the server's onthedot/nl/describe.py, in the browser so the page can say a
// task's schedule in the language the viewer picked (the API stores only the schedule).
// tests/web/test_describe.py runs both over the same schedules and requires the same words.
// Anything these rules do not read (VEVENT, cron ranges with steps, ...) is shown as written.

const EN_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const ZH_DAYS = "一二三四五六日";
const RRULE_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"];
const EN_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
  "September", "October", "November", "December"];
const EN_NTH = { 1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", "-1": "last" };
const ZH_NTH = { 1: "一", 2: "二", 3: "三", 4: "四", 5: "五" };
// Words that differ between the scripts: [Traditional, Simplified].
const ZH = {
  week: ["週", "周"],
  workdays: ["每個工作日", "每个工作日"],
  minute: ["分鐘", "分钟"],
  hour: ["小時", "小时"],
  month_n: ["個月", "个月"],
  last_day: ["最後一天", "最后一天"],
  last_one: ["最後一個", "最后一个"],
  nth: ["第{n}個", "第{n}个"],
};

class Unreadable extends Error {}

function zhWord(key, language) {
  return ZH[key][language === "zh-Hant" ? 0 : 1];
}

/** Python's int() for the digits schedules hold; anything else is unreadable. */
function int(text) {
  if (typeof text !== "string" || !/^\s*[+-]?\d+\s*$/.test(text)) throw new Unreadable(text);
  return Number.parseInt(text, 10);
}

/** list[i] with Python's negative indexes; out of range is unreadable. */
function at(list, i) {
  const j = i < 0 ? list.length + i : i;
  if (j < 0 || j >= list.length) throw new Unreadable(String(i));
  return list[j];
}

function lookup(table, key) {
  if (!Object.hasOwn(table, String(key))) throw new Unreadable(String(key));
  return table[String(key)];
}

function indexOf(list, item) {
  const i = list.indexOf(item);
  if (i < 0) throw new Unreadable(item);
  return i;
}

export function describe(schedule, language) {
  try {
    if (schedule.toUpperCase().startsWith("RRULE:")) return rrule(schedule, language);
    const fields = schedule.trim().split(/\s+/);
    if (fields.length === 5) return cron(fields, language);
  } catch (error) {
    if (!(error instanceof Unreadable)) throw error;
  }
  return schedule;
}

function hhmm(hour, minute) {
  return `${pad(int(String(hour)))}:${pad(int(String(minute)))}`;
}

function pad(n) {
  return String(n).padStart(2, "0");
}

/** Cron day-of-week field to weekdays with Monday = 0. */
function cronDays(dow) {
  const days = new Set();
  for (const part of dow.split(",")) {
    const dash = part.indexOf("-");
    const lo = dash < 0 ? part : part.slice(0, dash);
    const hi = dash < 0 ? "" : part.slice(dash + 1);
    for (let n = int(lo); n <= int(hi || lo); n++) days.add((((n - 1) % 7) + 7) % 7);
  }
  return [...days].sort((a, b) => a - b);
}

function isWorkdays(days) {
  return days.length === 5 && days.every((d, i) => d === i);
}

function joinAnd(words) {
  if (words.length === 0) throw new Unreadable("no days");
  return words.length === 1 ? words[0]
    : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

function weekdays(days, language) {
  if (language === "en") {
    if (isWorkdays(days)) return "every weekday";
    return `every ${joinAnd(days.map((d) => at(EN_DAYS, d)))}`;
  }
  if (isWorkdays(days)) return zhWord("workdays", language);
  return `每${zhWord("week", language)}${days.map((d) => at([...ZH_DAYS], d)).join("、")}`;
}

function cron(fields, language) {
  const [minute, hour, dom, month, dow] = fields;
  const en = language === "en";
  const onDays = dow === "*" ? "" : weekdays(cronDays(dow), language);
  if (hour === "*" || hour.startsWith("*/")) {
    let n;
    let unit;
    if (hour === "*" && (minute === "*" || minute.startsWith("*/"))) {
      n = minute === "*" ? 1 : int(minute.slice(2));
      unit = "minute";
    } else if (minute === "0") {
      n = hour === "*" ? 1 : int(hour.slice(2));
      unit = "hour";
    } else {
      throw new Unreadable(minute);
    }
    if (en) {
      const every = n === 1 ? `every ${unit}` : `every ${n} ${unit}s`;
      return every + (onDays ? ` on ${pluralDays(cronDays(dow))}` : "");
    }
    const every = n === 1 ? `每${zhWord(unit, language)}` : `每 ${n} ${zhWord(unit, language)}`;
    return onDays + every;
  }
  const time = hhmm(hour, minute);
  if (dom === "*" && month === "*") {
    if (dow === "*") return en ? `every day at ${time}` : `每天 ${time}`;
    return en ? `${onDays} at ${time}` : `${onDays} ${time}`;
  }
  if (dow !== "*") throw new Unreadable(dow);
  const days = dom.split(",").map(int);
  if (month === "*") {
    if (en) return `on ${dayWord(days)} ${joinAnd(days.map(String))} of every month at ${time}`;
    return `每月${days.join("、")}日 ${time}`;
  }
  const m = int(month);
  if (en) return `every year on ${days[0]} ${at(EN_MONTHS, m - 1)} at ${time}`;
  return `每年${m}月${days[0]}日 ${time}`;
}

function pluralDays(days) {
  if (isWorkdays(days)) return "weekdays";
  return joinAnd(days.map((d) => `${at(EN_DAYS, d)}s`));
}

function dayWord(days) {
  return days.length === 1 ? "day" : "days";
}

function rrule(schedule, language) {
  const rule = {};
  for (const part of schedule.slice(6).split(";")) {
    if (!part) continue;
    const eq = part.indexOf("=");
    if (eq < 0) throw new Unreadable(part);
    rule[part.slice(0, eq)] = part.slice(eq + 1);
  }
  const freq = lookup(rule, "FREQ").toUpperCase();
  const n = int(rule.INTERVAL ?? "1");
  const time = hhmm(rule.BYHOUR ?? "0", rule.BYMINUTE ?? "0");
  const en = language === "en";
  if (freq === "DAILY") {
    if (en) return n === 1 ? `every day at ${time}` : `every ${n} days at ${time}`;
    return n === 1 ? `每天 ${time}` : `每 ${n} 天 ${time}`;
  }
  if (freq === "WEEKLY") {
    const days = lookup(rule, "BYDAY").split(",").map((d) => indexOf(RRULE_DAYS, d))
      .sort((a, b) => a - b);
    if (n === 1) return `${weekdays(days, language)} ${en ? "at " : ""}${time}`;
    if (en) return `every ${n} weeks on ${weekdays(days, language).slice(6)} at ${time}`;
    return `每 ${n} ${zhWord("week", language)}的${weekdays(days, language).slice(1)} ${time}`;
  }
  if (freq === "MONTHLY") return monthly(rule, n, time, language);
  throw new Unreadable(freq);
}

function monthly(rule, n, time, language) {
  const en = language === "en";
  let every;
  if (en) every = n === 1 ? "every month" : `every ${n} months`;
  else every = n === 1 ? "每月" : `每 ${n} ${zhWord("month_n", language)}的`;
  if (Object.hasOwn(rule, "BYDAY")) {
    const code = rule.BYDAY;
    const nth = int(code.slice(0, -2));
    const day = indexOf(RRULE_DAYS, code.slice(-2));
    if (en) return `on the ${lookup(EN_NTH, nth)} ${EN_DAYS[day]} of ${every} at ${time}`;
    const which = nth === -1 ? zhWord("last_one", language)
      : zhWord("nth", language).replace("{n}", lookup(ZH_NTH, nth));
    return `${every}${which}${zhWord("week", language)}${ZH_DAYS[day]} ${time}`;
  }
  const days = lookup(rule, "BYMONTHDAY").split(",").map(int);
  if (days.length === 1 && days[0] === -1) {
    if (en) return `on the last day of ${every} at ${time}`;
    return `${every}${zhWord("last_day", language)} ${time}`;
  }
  if (en) return `on ${dayWord(days)} ${joinAnd(days.map(String))} of ${every} at ${time}`;
  return `${every}${days.join("、")}日 ${time}`;
}
