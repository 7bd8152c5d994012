/**
 * A whole number read from a URL (a query value, a path parameter), documented as the integer it
 * is. Only digits are read as a number: an empty value (`?wait=`, `?wait`), a sign, a space or a
 * typo is refused naming the parameter, never read as 0, so a slip cannot turn a stop with a grace
 * period into "kill now". The API's schemas and the host agent's (domain/host-agent-api.ts) both
 * read URLs with it.
 */
import { z } from 'zod'

const DIGITS = /^[0-9]+$/

export function urlInteger (min: number, max: number) {
  return z.preprocess(
    (value) => typeof value === 'string' && DIGITS.test(value) ? Number(value) : value,
    z.int({
      error: (issue) => issue.code !== 'invalid_type'
        ? undefined
        : typeof issue.input === 'number' ? `must be at most ${max}` : 'must be a whole number written in digits'
    }).min(min).max(max)
  )
}
