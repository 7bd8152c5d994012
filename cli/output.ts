/**
 * How results reach stdout: `--output json` prints the API's JSON as it came, for scripts;
 * `--output table` (the default) prints aligned columns or `key: value` lines, for people.
 * Progress and errors go to stderr, so stdout stays parseable either way.
 */

export const OUTPUT_FORMATS = ['table', 'json'] as const
export type OutputFormat = (typeof OUTPUT_FORMATS)[number]

export function printJson (value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
}

export function printText (text: string): void {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`)
}

/** Columns padded to their widest cell; the last one is not, so no line ends in spaces. */
export function table (header: string[], rows: string[][]): string {
  const all = [header, ...rows]
  const widths = header.map((_, column) => Math.max(...all.map((row) => row[column]?.length ?? 0)))
  return all
    .map((row) => row.map((cell, column) => column === row.length - 1 ? cell : cell.padEnd(widths[column])).join('  '))
    .join('\n')
}

/** `key: value` lines, values aligned; a value of several lines continues under the first. */
export function fields (pairs: Array<[string, string]>): string {
  const width = Math.max(...pairs.map(([key]) => key.length)) + 2
  const indent = ' '.repeat(width)
  return pairs
    .map(([key, value]) => `${key}:`.padEnd(width) + value.split('\n').join(`\n${indent}`))
    .join('\n')
}

/** An API timestamp to the second, still UTC: `2026-11-22 09:30:12Z`; `-` for none. */
export function timestamp (iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '-'
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')
}

export function seconds (ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`
}
