/**
 * The operator's replay check (scripts/replay.ts, in docs/operations.md): a recorded history
 * replays and the script exits 0; the same history with one activity renamed, as a workflow
 * change outside `patched()` would make it, is reported as nondeterministic with exit 1.
 * (The runbook test runs it on a history fetched from a live stack.)
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { REPO_ROOT } from '../../scripts/tools/paths.js'

const HISTORIES = join(REPO_ROOT, 'test', 'replay', 'histories')
const REPLAY = join(REPO_ROOT, 'dist', 'scripts', 'replay.js')

interface History { events: Array<{ activityTaskScheduledEventAttributes?: { activityType: { name: string } } }> }

async function replay (file: string): Promise<{ code: number, stdout: string }> {
  try {
    return { code: 0, stdout: (await promisify(execFile)(process.execPath, [REPLAY, file])).stdout }
  } catch (error) {
    const { code, stdout } = error as { code: number, stdout: string }
    return { code, stdout }
  }
}

describe('node dist/scripts/replay.js', () => {
  let dir: string
  let recorded: string
  let history: History
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vmplane-replay-'))
    // A stop's history: it schedules activities (the power button), so renaming one is a change of shape.
    const name = (await readdir(HISTORIES)).filter((file) => file.startsWith('stopInstance-')).sort()[0]!
    recorded = join(HISTORIES, name)
    history = JSON.parse(await readFile(recorded, 'utf8'))
  })
  after(async () => { await rm(dir, { recursive: true, force: true }) })

  it('says a recorded history replays deterministically, and exits 0', async () => {
    const { code, stdout } = await replay(recorded)
    assert.equal(code, 0, stdout)
    assert.match(stdout, new RegExp(`stopInstance, ${history.events.length} events: replays deterministically on this build`))
  })

  it('says a history the workflow code no longer matches does not replay, names the mismatch, and exits 1', async () => {
    const changed = structuredClone(history)
    const scheduled = changed.events.find((e) => e.activityTaskScheduledEventAttributes !== undefined)!.activityTaskScheduledEventAttributes!
    const original = scheduled.activityType.name
    scheduled.activityType.name = 'renamedActivity'
    const tampered = join(dir, 'tampered.json')
    await writeFile(tampered, JSON.stringify(changed))
    const { code, stdout } = await replay(tampered)
    assert.equal(code, 1, stdout)
    assert.match(stdout, /does NOT replay on this build/)
    assert.match(stdout, /DeterminismViolationError/)
    assert.ok(stdout.includes(`'renamedActivity' does not match activity type of activity command '${original}'`), stdout)
  })
})
