import type { RunSkill } from '../db/sql/run-context.ts';

export type ChatMessage = { role: 'system' | 'user'; content: string };

/**
 * Formatters by time zone: building an Intl.DateTimeFormat costs far more than using one, and a
 * busy worker formats the same few zones over and over. Zone names are validated on input, so
 * the map stays as small as the set of zones tasks use.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();
/**
 * The last text formatted per zone with its minute: the text shows minutes, not seconds, and a
 * busy worker formats the same minute for run after run (formatting was about 1% of a worker's
 * CPU with an instant model). Every zone's offset today is a whole number of minutes.
 */
const lastMinute = new Map<string, { minute: number; text: string }>();

/** How the time context writes an instant in a zone, by Intl (any zone but 'UTC'). */
export const TIME_CONTEXT_LOCALE = 'en-GB';
export const TIME_CONTEXT_FORMAT: Intl.DateTimeFormatOptions = {
  weekday: 'long',
  year: 'numeric',
  month: 'long',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  hourCycle: 'h23',
  timeZoneName: 'short',
};

const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
const twoDigits = (n: number) => String(n).padStart(2, '0');

/**
 * What the formatter below writes for 'UTC', without it: the first Intl.DateTimeFormat of a
 * process loads ICU's locale and zone data (about 15 ms and 9 MB of memory on the machine of
 * docs/benchmarks.md), which a worker whose tasks keep the default zone never needs
 * (test/prompt-time.test.ts holds the two to the same text).
 */
function utcDateTime(instant: Date): string {
  const weekday = WEEKDAYS[instant.getUTCDay()] ?? '';
  const month = MONTHS[instant.getUTCMonth()] ?? '';
  return `${weekday}, ${instant.getUTCDate()} ${month} ${instant.getUTCFullYear()} at ${twoDigits(instant.getUTCHours())}:${twoDigits(instant.getUTCMinutes())} UTC`;
}

function localDateTime(instant: Date, timeZone: string): string {
  if (timeZone === 'UTC') return utcDateTime(instant);
  const minute = Math.floor(instant.getTime() / 60_000);
  const last = lastMinute.get(timeZone);
  if (last?.minute === minute) return last.text;
  let format = formatters.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat(TIME_CONTEXT_LOCALE, { ...TIME_CONTEXT_FORMAT, timeZone });
    formatters.set(timeZone, format);
  }
  const text = format.format(instant);
  lastMinute.set(timeZone, { minute, text });
  return text;
}

/**
 * The time context every prompt is sent with, so that "today" means the task owner's today:
 * the slot the run is for (scheduled runs) and the current date and time, in the task's zone.
 */
export function timeContext(timeZone: string, now: Date, slot: Date | null): string {
  const lines = [
    `Current date and time: ${localDateTime(now, timeZone)} (time zone ${timeZone}; ${now.toISOString()}).`,
  ];
  if (slot)
    lines.push(
      `This run is for the scheduled time ${localDateTime(slot, timeZone)} (${slot.toISOString()}).`,
    );
  else lines.push('This run was started on demand, not by the schedule.');
  return lines.join('\n');
}

/**
 * The messages of a run, in a stable order: each attached skill as a system message (in the
 * order the task lists them, headed by its name), then the time context, then the task's prompt.
 */
export function assembleMessages(
  skills: readonly RunSkill[],
  prompt: string,
  timeZone: string,
  now: Date,
  slot: Date | null,
): ChatMessage[] {
  return [
    ...skills.map((s): ChatMessage => ({ role: 'system', content: `# Skill: ${s.name}\n\n${s.content}` })),
    { role: 'system', content: timeContext(timeZone, now, slot) },
    { role: 'user', content: prompt },
  ];
}

/**
 * The sources that attached skills require (frontmatter `requiredSources`, source slugs) but
 * the task lacks, in skill order: a skill whose instructions count on a tool that is not there
 * would send the model in the wrong direction, so such a run fails before any model call.
 */
export function missingRequiredSources(
  skills: readonly RunSkill[],
  sources: readonly { slug: string }[],
): { skill: string; source: string }[] {
  const attached = new Set(sources.map((s) => s.slug));
  return skills.flatMap((skill) =>
    (Array.isArray(skill.required_sources) ? skill.required_sources : [])
      .filter((slug) => !attached.has(slug))
      .map((slug) => ({ skill: skill.name, source: slug })),
  );
}

/**
 * The instruction that asks for output matching a task's outputSchema, for a model that takes
 * no schema in its request: a system message just before the task's prompt.
 */
export function outputSchemaInstruction(schema: Record<string, unknown>): ChatMessage {
  return {
    role: 'system',
    content: `Answer with one JSON value that matches the JSON Schema below, and nothing else: no explanation, no Markdown code fence. Your answer is parsed as JSON and validated against the schema.\n\nJSON Schema:\n${JSON.stringify(schema)}`,
  };
}
