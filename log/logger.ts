/**
 * Structured logs for every vmplane process: pino, one JSON line per event, or human-readable
 * lines when `VMPLANE_LOG_PRETTY` is on (the dev stack). Callers bind what they know
 * (`instanceId`, `vmmId`, `hostId`, `workflowId`) with `logger.child`.
 */
import { pino, type Logger } from 'pino'
import pretty from 'pino-pretty'
import type { LogConfig } from '../config/index.js'

export type { Logger }

/** A process's root logger; `bindings` ride on every line (the agent's `hostId`, say). */
export function createLogger (config: LogConfig, component: string, bindings: Record<string, string> = {}): Logger {
  const options = { level: config.level, base: { component, ...bindings } }
  if (!config.pretty) return pino(options)
  return pino(options, pretty({ colorize: process.stdout.isTTY, ignore: 'pid,hostname,component', translateTime: 'HH:MM:ss.l', singleLine: true, sync: true }))
}
