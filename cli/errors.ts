/**
 * What went wrong, as the exit code a script can act on. Every failure the CLI expects is a
 * `CliError`; bin/vmplane.ts prints its message on one line and exits with its code.
 */

/** What each code means is said once, in MEANINGS below, which `--help` prints. */
export const EXIT = {
  ok: 0,
  refused: 1,
  usage: 2,
  unavailable: 3,
  timedOut: 4
} as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

const MEANINGS: Record<ExitCode, string> = {
  [EXIT.ok]: 'success',
  [EXIT.refused]: 'the operation ended failed or superseded, or the API refused the request (4xx)',
  [EXIT.usage]: 'usage error: unknown command, missing or invalid argument, no API URL or token',
  [EXIT.unavailable]: 'the API is unreachable or answered 5xx',
  [EXIT.timedOut]: '--wait timed out (the operation goes on)'
}

/** The exit codes, for `vmplane --help`. */
export const EXIT_CODES_HELP = `Exit codes:\n${Object.entries(MEANINGS).map(([code, meaning]) => `  ${code}  ${meaning}`).join('\n')}`

export class CliError extends Error {
  constructor (message: string, readonly exitCode: ExitCode) {
    super(message)
  }
}

export class UsageError extends CliError {
  constructor (message: string) {
    super(message, EXIT.usage)
  }
}

/** A problem+json answer (or any other 4xx/5xx) from the API. */
export class ApiError extends CliError {
  constructor (readonly status: number, readonly detail: string, readonly retryAfterSeconds: number | null) {
    super(apiErrorMessage(status, detail, retryAfterSeconds), status >= 500 ? EXIT.unavailable : EXIT.refused)
  }
}

function apiErrorMessage (status: number, detail: string, retryAfterSeconds: number | null): string {
  const retry = retryAfterSeconds === null ? '' : `; retry in ${retryAfterSeconds} s`
  return `${detail}${retry} (HTTP ${status})`
}

/** The one line printed for any error: no stack trace, no line breaks. */
export function oneLine (message: string): string {
  return message.split('\n').map((part) => part.trim()).filter((part) => part !== '').join(' ')
}
