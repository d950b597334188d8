// The one rule for an e-mail destination, used where one is saved (the API, the dashboard) and
// again where a mail is sent: the same value cannot pass one check and fail the other.
// It is exactly one bare address, `local@domain`, in the plain form every SMTP server takes:
// no display name (`Name <a@b>`), no list or group (`a@b, c@d`, `g: a@b;`), no comment, no
// quoted local part, no address literal, ASCII only. Mail libraries parse all of those other
// forms (into several recipients, or another one), so refusing them keeps what is stored what
// is sent.

/** RFC 5322 atext: what a dot-atom local part is made of. */
const LOCAL = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
/** A host name label (letters, digits, inner hyphens). */
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/** RFC 5321: a path holds at most 256 characters with its angle brackets. */
export const MAX_EMAIL_ADDRESS_LENGTH = 254;
const MAX_LOCAL_LENGTH = 64;

export const EMAIL_ADDRESS_RULE =
  'must be one e-mail address such as name@example.com: no display name, list, comment or quotes, ASCII only';

/** Undefined when `value` is one plain address; otherwise what is wrong with it. */
export function emailAddressProblem(value: string): string | undefined {
  if (value.length > MAX_EMAIL_ADDRESS_LENGTH) {
    return `must be one e-mail address of at most ${MAX_EMAIL_ADDRESS_LENGTH} characters`;
  }
  const at = value.lastIndexOf('@');
  if (at <= 0) return EMAIL_ADDRESS_RULE;
  const local = value.slice(0, at);
  const labels = value.slice(at + 1).split('.');
  if (local.length > MAX_LOCAL_LENGTH || !LOCAL.test(local)) return EMAIL_ADDRESS_RULE;
  // At least a name and a top-level domain; a top-level domain of digits would be an IP address.
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) return EMAIL_ADDRESS_RULE;
  if (/^[0-9]+$/.test(labels.at(-1) ?? '')) return EMAIL_ADDRESS_RULE;
  return undefined;
}
