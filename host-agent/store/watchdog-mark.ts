/**
 * The mark a host's watchdog leaves in the agent's state directory when it fires, so that the
 * agent records the VMMs it killed as fenced, not crashed: the agent did not send those SIGKILLs
 * and would otherwise take them for a crash (docs/design.md §17).
 */
import { stat } from 'node:fs/promises'
import { writeFileAtomic } from './record-store.js'

const MARK = 'watchdog-fired'

export async function markWatchdogFired (stateDir: string): Promise<void> {
  await writeFileAtomic(stateDir, MARK, `${new Date().toISOString()}\n`)
}

/** Whether the host's watchdog fired at or after `since` (ms since the epoch). */
export async function watchdogFiredSince (stateDir: string, since: number): Promise<boolean> {
  const marked = await stat(`${stateDir}/${MARK}`).then((s) => s.mtimeMs, () => null)
  return marked !== null && marked >= since
}
