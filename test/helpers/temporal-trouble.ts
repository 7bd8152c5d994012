/**
 * What Temporal's server went through while a stack ran, for a failing wait's message: the
 * errors its log holds, by message, and its exits. A stack's logs go to test-output/ with it, but
 * a CI report carries a failure's message alone; when an operation hangs because the server
 * could not take requests, this is where that shows.
 *
 * Both shapes' servers log errors: the dev server as text (`level=ERROR msg="…" … error="…"`),
 * the cluster's as JSON (`"level":"error","msg":"…",…,"error":"…"`).
 */
import type { TestStack } from './stack.js'

const ERROR_LINE = /level=ERROR|"level":"error"/
const SHOWN = 5

export async function temporalTrouble (stack: TestStack): Promise<string> {
  return temporalErrorSummary(await stack.logLines('temporal'), (await stack.exitsOf('temporal', 0)).map((exit) => exit.note))
}

/** The error lines of a server's log by message, the most frequent first, and its exits. */
export function temporalErrorSummary (lines: string[], exits: string[]): string {
  const errors = new Map<string, { count: number, first: string }>()
  for (const line of lines) {
    if (!ERROR_LINE.test(line)) continue
    const key = `${field(line, 'msg')}: ${field(line, 'error')}`
    const seen = errors.get(key)
    if (seen === undefined) errors.set(key, { count: 1, first: field(line, 'time') || field(line, 'ts') })
    else seen.count++
  }
  const total = [...errors.values()].reduce((sum, { count }) => sum + count, 0)
  const byCount = [...errors].sort(([, a], [, b]) => b.count - a.count).slice(0, SHOWN)
  return [
    `Temporal: ${total} error line(s) logged${total === 0 ? '' : `, the most frequent ${byCount.length}:`}`,
    ...byCount.map(([key, { count, first }]) => `  ${count}× from ${first}: ${key}`),
    exits.length === 0 ? 'Temporal never ended' : `Temporal ended ${exits.length} time(s): ${exits.join('; ')}`
  ].join('\n')
}

/** A field of a log line in either format, or '' if it has none. */
function field (line: string, name: string): string {
  const match = new RegExp(`(?:^|[ ,{])"?${name}"?[=:]"((?:[^"\\\\]|\\\\.)*)"|(?:^| )${name}=(\\S+)`).exec(line)
  return (match?.[1] ?? match?.[2] ?? '').slice(0, 300)
}
