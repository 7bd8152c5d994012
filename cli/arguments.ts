/**
 * Parsers for numeric arguments. A bad value becomes commander's one-line usage error (exit 2)
 * before any request is made; ranges are left to the API, which names its own limits.
 */
import { InvalidArgumentError } from 'commander'

export function wholeNumber (value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('must be a whole number.')
  return Number(value)
}

export function positiveSeconds (value: string): number {
  const seconds = Number(value)
  if (value.trim() === '' || !Number.isFinite(seconds) || seconds <= 0) throw new InvalidArgumentError('must be a number of seconds above 0.')
  return seconds
}
