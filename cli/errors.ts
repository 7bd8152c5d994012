/**
 * What went wrong, as the exit code a script can act on. Every failure the CLI expects is a
 * `CliError`; bin/vmplane.ts prints its message on one line and exits with its code.
 */

export const EXIT = {
  ok: 0,
  /** The operation ended failed or superseded, or the API refused the request (4xx). */
  refused: 1,
  /** Unknown command, missing or invalid argument, no API configured. */
  usage: 2,
  /** The API cannot be reached, or answered 5xx: trying again later may work. */
  unavailable: 3,
  /** `--wait` gave up before the operation ended; the operation itself goes on. */
  timedOut: 4
} as const

export type ExitCode = (typeof EXIT)[keyof typeof EXIT]

/** The exit codes, for `vmplane --help`. */
export const EXIT_CODES_HELP = `Exit codes:
  0  success
  1  the operation ended failed or superseded, or the API refused the request (4xx)
  2  usage error: unknown command, missing or invalid argument, no API URL or token
  3  the API is unreachable or answered 5xx
  4  --wait timed out (the operation goes on)`

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
