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

/** `--disk name:GiB`, repeatable: an empty data disk. */
export function dataDisk (value: string, previous: Array<{ name: string, sizeGiB: number }> = []): Array<{ name: string, sizeGiB: number }> {
  const match = /^([^:]+):(\d+)$/.exec(value)
  if (match === null) throw new InvalidArgumentError('must be name:GiB, e.g. data:10.')
  return [...previous, { name: match[1]!, sizeGiB: Number(match[2]) }]
}

/** `--network name[=ip]`, repeatable: an interface on that network, at that address if given. */
export function networkInterface (value: string, previous: Array<{ network: string, ip?: string }> = []): Array<{ network: string, ip?: string }> {
  const [network, ip, ...rest] = value.split('=')
  if (network === undefined || network === '' || rest.length > 0 || ip === '') throw new InvalidArgumentError('must be a network, or network=address, e.g. default=10.77.0.10.')
  return [...previous, { network, ...(ip === undefined ? {} : { ip }) }]
}

/** A repeatable option that takes a value as it is. */
export function repeated (value: string, previous: string[] = []): string[] {
  return [...previous, value]
}
