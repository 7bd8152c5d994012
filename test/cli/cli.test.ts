/**
 * The `vmplane` CLI against a whole stack, run as a child process the way a person or a script
 * runs it: an instance created, inspected, stopped, started, rebooted and deleted; `--wait`
 * showing each state transition, and its exit codes when the operation succeeds, is superseded
 * or outlasts `--timeout`; refusals as one line; the API found through the data directory.
 */
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { waitUntil } from '../../stack/wait.js'
import { assertOneLineError, runCli, startCli, type CliResult } from '../helpers/cli.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const BOOT = ['--vcpus', '1', '--memory', '256', '--kernel', 'vmlinux', '--initramfs', 'initrd.img']
/**
 * A guest slow enough to boot and to power off (the simulated VMM's directives) that polls every
 * 300 ms see `starting` and `stopping`, so the transitions shown can be asserted whole.
 */
const SLOW_GUEST = 'console=ttyS0 sim.boot_ms=1500 sim.shutdown_ms=1500'
/** A boot that never completes (the simulated VMM's directive): its create runs until preempted. */
const STUCK_BOOT = [...BOOT, '--cmdline', 'console=ttyS0 sim.boot_ms=never']

/** The states a non-TTY progress output went through: one line per transition, `name: a → b (1.2 s)`. */
function progressStates (stderr: string, name: string): string[] {
  const lines = stderr.split('\n').filter((line) => line.startsWith(`${name}: `))
  return lines.map((line) => {
    const match = new RegExp(`^${name}: (?:[a-z]+ → )?([a-z]+) \\(\\d+\\.\\d s\\)$`).exec(line)
    assert.ok(match !== null, `a progress line: ${line}`)
    return match[1]
  })
}

/**
 * Asserts the states shown are the path's transitions in order, a line each, ending at its end.
 * The first may already be the second: the request's answer reads the instance after the workflow
 * has the request, and a busy machine can let the workflow move first. A state between may be
 * missed too when a poll is late by more than the slow guest's 1.5 s (the exact lines are
 * progress.test.ts's to hold).
 */
function assertTransitions (stderr: string, name: string, path: readonly string[]): void {
  const states = progressStates(stderr, name)
  const message = `the transitions along ${path.join(' → ')}, a line each:\n${stderr}`
  assert.equal(states.at(-1), path.at(-1), message)
  assert.ok(states.length >= 2, message)
  const positions = states.map((state) => path.indexOf(state))
  assert.ok(positions.every((position, i) => position >= 0 && (i === 0 || position > positions[i - 1]!)), message)
}

function field (stdout: string, key: string): string {
  const match = new RegExp(`^${key}: +(.*)$`, 'm').exec(stdout)
  assert.ok(match !== null, `a "${key}:" line in\n${stdout}`)
  return match[1]
}

function assertSucceeded (result: CliResult): void {
  assert.equal(result.code, 0, `exit 0; stderr:\n${result.stderr}`)
  assert.doesNotMatch(result.stderr, /^vmplane: /m, 'no error line')
}

describe('vmplane CLI against a stack', () => {
  let stack: TestStack
  let env: Record<string, string>
  let id: string

  before(async () => {
    stack = await startStack()
    env = { VMPLANE_URL: stack.info.apiUrl, VMPLANE_TOKEN: stack.info.apiToken }
  })
  after(async () => { await stack?.stop() })

  const cli = async (...args: string[]) => await runCli(args, { env })
  async function json<T> (...args: string[]): Promise<T> {
    const result = await cli(...args, '--output', 'json')
    assertSucceeded(result)
    return JSON.parse(result.stdout) as T
  }

  it('create --wait shows every state transition on its own line, ends running and exits 0', async () => {
    const result = await cli('instances', 'create', '--name', 'cli-web', ...BOOT, '--cmdline', SLOW_GUEST, '--wait')
    assertSucceeded(result)
    assertTransitions(result.stderr, 'cli-web', ['creating', 'starting', 'running'])
    assert.equal(field(result.stdout, 'state'), 'running (intended: running)')
    assert.equal(field(result.stdout, 'operation'), 'none in flight')
    assert.match(field(result.stdout, 'vmm'), /^\S+ on host-\d+: running/)
    id = field(result.stdout, 'id')
  })

  it('list, get and events: tables for people, the API\'s own JSON for scripts', async () => {
    const list = await cli('instances', 'list')
    assertSucceeded(list)
    assert.match(list.stdout, /^NAME +STATE +INTENDED +HOST +OPERATION +CONDITIONS +ID$/m)
    assert.match(list.stdout, new RegExp(`^cli-web +running +running +host-\\d+ +- +- +${id}$`, 'm'))
    const page = await json<{ items: Array<{ id: string }>, nextCursor: string | null }>('instances', 'list')
    assert.deepEqual(page, (await api(stack.info).get('/v1/instances')).body)

    // By name or by ID: the same instance, and the view that says why it is in its state.
    const byName = await cli('instances', 'get', 'cli-web')
    assertSucceeded(byName)
    assert.equal(byName.stdout, (await cli('instances', 'get', id)).stdout)
    assert.equal(field(byName.stdout, 'id'), id)
    assert.equal(field(byName.stdout, 'last error'), 'none')
    assert.equal(field(byName.stdout, 'conditions'), 'none')
    assert.equal(field(byName.stdout, 'boot'), `kernel vmlinux, initramfs initrd.img, cmdline "${SLOW_GUEST}"`)
    assert.deepEqual(await json('instances', 'get', id), (await api(stack.info).get(`/v1/instances/${id}`)).body)

    const events = await cli('instances', 'events', 'cli-web')
    assertSucceeded(events)
    assert.match(events.stdout, /^AT +KIND +STATE +MESSAGE$/m)
    // Newest first, each with its reason: the create started, placed a VMM, and finished running.
    const rows = events.stdout.trim().split('\n').slice(1)
    assert.match(rows[0], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +operation-finished +running +running on host-\d+$/)
    assert.match(rows.at(-1)!, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +operation-started +\w+ +created; starting$/)
    assert.ok(rows.some((row) => / vmm-placed +starting +placed VMM \S+ on host-\d+$/.test(row)), events.stdout)
    const history = await json<{ items: Array<{ kind: string, state: string | null }>, nextCursor: string | null }>('instances', 'events', id)
    assert.deepEqual(history, (await api(stack.info).get(`/v1/instances/${id}/events`)).body)
    assert.ok(history.items.some((e) => e.kind === 'operation-finished'), 'the create finished')
  })

  it('stop --wait ends stopped, start --wait running again (as JSON for scripts), each showing its transitions', async () => {
    const stop = await cli('instances', 'stop', 'cli-web', '--grace', '10', '--wait')
    assertSucceeded(stop)
    assertTransitions(stop.stderr, 'cli-web', ['running', 'stopping', 'stopped'])
    assert.equal(field(stop.stdout, 'state'), 'stopped (intended: stopped)')

    // With --output json, stdout holds only the outcome, in the shape of the API's answer to a change.
    const start = await cli('instances', 'start', id, '--wait', '--output', 'json')
    assertSucceeded(start)
    assertTransitions(start.stderr, 'cli-web', ['stopped', 'starting', 'running'])
    const outcome = JSON.parse(start.stdout) as { instance: { id: string, state: string }, operation: { kind: string, status: string } }
    assert.deepEqual([outcome.instance.id, outcome.instance.state], [id, 'running'])
    assert.deepEqual([outcome.operation.kind, outcome.operation.status], ['start', 'succeeded'])
  })

  it('reboot without --wait answers with its operation, which operations get shows to its end', async () => {
    const reboot = await cli('instances', 'reboot', 'cli-web')
    assertSucceeded(reboot)
    const accepted = /^cli-web: reboot accepted as operation (\S+); state: \w+$/m.exec(reboot.stdout)
    assert.ok(accepted !== null, reboot.stdout)
    const operationId = accepted[1]
    assert.match(reboot.stdout, new RegExp(`^follow it with: vmplane operations get ${operationId}$`, 'm'))

    await waitUntil('the reboot to end', async () =>
      (await json<{ status: string }>('operations', 'get', operationId)).status !== 'running', { timeoutMs: 60_000, intervalMs: 500 })
    const operation = await json<{ kind: string, instanceId: string, status: string }>('operations', 'get', operationId)
    assert.deepEqual(operation, (await api(stack.info).get(`/v1/operations/${operationId}`)).body)
    assert.deepEqual([operation.kind, operation.instanceId, operation.status], ['reboot', id, 'succeeded'])
    const table = await cli('operations', 'get', operationId)
    assertSucceeded(table)
    assert.equal(field(table.stdout, 'kind'), 'reboot')
    assert.equal(field(table.stdout, 'status'), 'succeeded')
    assert.equal(field(table.stdout, 'error'), 'none')
    assert.match(field(table.stdout, 'finished'), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(took \d+\.\d s\)$/)
  })

  it('hosts list shows every host of the stack', async () => {
    const hosts = await cli('hosts', 'list')
    assertSucceeded(hosts)
    assert.match(hosts.stdout, /^ID +STATUS +SCHEDULING +VCPUS USED +MEMORY USED +VMMS +LAST HEARTBEAT +AGENT$/m)
    for (const host of stack.info.hosts) assert.match(hosts.stdout, new RegExp(`^${host.id} +active +schedulable +\\d+/\\d+ +\\d+/\\d+ MiB +\\d+ `, 'm'))
    const list = await json<{ items: Array<{ id: string }> }>('hosts', 'list')
    assert.deepEqual(list.items.map((h) => h.id).sort(), stack.info.hosts.map((h) => h.id).sort())
  })

  it('projects, quotas and tokens: a project made and bounded, a token for it, and that token acting in it alone', async () => {
    assertSucceeded(await cli('projects', 'create', 'cli-team'))
    const set = await cli('--project', 'cli-team', 'quotas', 'set', '--vcpus', '2', '--instances', '1')
    assertSucceeded(set)
    assert.match(set.stdout, /^vcpus +0 +2$/m)
    assert.match(set.stdout, /^memoryMiB +0 +none$/m)
    const made = await json<{ token: string, role: string }>('--project', 'cli-team', 'tokens', 'create', 'cli-team-ci', '--role', 'collaborator')
    assert.equal(made.role, 'collaborator')
    const team = async (...args: string[]) => await runCli(['--project', 'cli-team', ...args], { env: { ...env, VMPLANE_TOKEN: made.token } })
    assertSucceeded(await team('instances', 'create', '--name', 'only-one', ...BOOT, '--no-start'))
    const second = await team('instances', 'create', '--name', 'one-too-many', ...BOOT, '--no-start')
    assertOneLineError(second, 1, /quota on instances is 1: 1 in use, and this instance needs 1/)
    const listed = await team('instances', 'list')
    assertSucceeded(listed)
    assert.match(listed.stdout, /only-one/)
    // The team's token sees its project alone: the default project's instances are another's.
    assertOneLineError(await runCli(['instances', 'list'], { env: { ...env, VMPLANE_TOKEN: made.token } }), 1, /project default does not exist/)
    assertOneLineError(await team('projects', 'create', 'escalated'), 1, /may not run the fleet/)
    const tokens = await cli('--project', 'cli-team', 'tokens', 'list')
    assertSucceeded(tokens)
    assert.match(tokens.stdout, /^cli-team-ci +collaborator /m)
    assert.doesNotMatch(tokens.stdout, /vmp_/, 'no secret in a list')
  })

  it('--wait past --timeout exits 4 naming the operation, which goes on', async () => {
    const result = await cli('instances', 'create', '--name', 'cli-stuck', ...STUCK_BOOT, '--wait', '--timeout', '1')
    assert.equal(result.code, 4, result.stderr)
    const lines = result.stderr.trim().split('\n')
    const gaveUp = /^vmplane: gave up waiting after 1 s: create \S+ is still running and cli-stuck is (creating|starting)$/.exec(lines.at(-1)!)
    assert.ok(gaveUp !== null, result.stderr)
    assert.doesNotMatch(result.stderr, /^\s+at /m)
    // The states shown so far lie along creating → starting (the answer to the request may already
    // show starting, as assertTransitions says), a line each, the last the one the message names.
    const shown = progressStates(lines.slice(0, -1).join('\n'), 'cli-stuck')
    assert.match(shown.join(' → '), /^(creating|starting|creating → starting)$/, result.stderr)
    assert.equal(shown.at(-1), gaveUp[1], result.stderr)
    const instance = await json<{ operation: { kind: string, status: string } | null }>('instances', 'get', 'cli-stuck')
    assert.equal(instance.operation?.kind, 'create')
    assert.equal(instance.operation?.status, 'running')
  })

  it('a --wait whose operation is superseded exits 1; the delete that preempts it ends destroyed', async () => {
    const waiting = startCli(['instances', 'create', '--name', 'cli-preempted', ...STUCK_BOOT, '--wait'], { env })
    // The first line may already show starting (assertTransitions says why): `cli-preempted: starting (…)`.
    await waitUntil('the create to reach starting', async () => /^cli-preempted: (?:[a-z]+ → )?starting \(/m.test(waiting.stderr()), { timeoutMs: 60_000 })

    const deleted = await cli('instances', 'delete', 'cli-preempted', '--grace', '0', '--wait')
    assertSucceeded(deleted)
    assert.equal(progressStates(deleted.stderr, 'cli-preempted').at(-1), 'destroyed', deleted.stderr)
    assert.match(field(deleted.stdout, 'destroyed'), /^\d{4}-/)

    const preempted = await waiting.result
    assert.equal(preempted.code, 1, preempted.stderr)
    assert.match(preempted.stderr.trim().split('\n').at(-1)!, /^vmplane: create \S+ was superseded by a later request; cli-preempted is \w+$/)
    assert.doesNotMatch(preempted.stderr, /^\s+at /m)
  })

  it('delete --wait ends destroyed; a start the API refuses exits 1 with its reason on one line', async () => {
    for (const name of ['cli-web', 'cli-stuck']) {
      const deleted = await cli('instances', 'delete', name, '--grace', '0', '--wait')
      assertSucceeded(deleted)
      assert.equal(progressStates(deleted.stderr, name).at(-1), 'destroyed', deleted.stderr)
      assert.equal(field(deleted.stdout, 'state'), 'destroyed (intended: destroyed)')
    }
    assertOneLineError(await cli('instances', 'start', id), 1, /cannot start a destroyed instance.* \(HTTP 409\)$/)
    assertOneLineError(await cli('instances', 'start', 'cli-web'), 1, /no live instance is named cli-web/)
    const destroyed = await json<{ items: Array<{ id: string }> }>('instances', 'list', '--state', 'destroyed')
    assert.ok(destroyed.items.some((i) => i.id === id))
  })

  it('a wrong token, or values the API rejects, exit 1 with the API\'s detail on one line', async () => {
    assertOneLineError(await runCli(['hosts', 'list', '--token', 'wrong'], { env }), 1, /the bearer token is not valid \(HTTP 401\)$/)
    assertOneLineError(await cli('instances', 'create', '--name', 'Not_A_Name', ...BOOT), 1, /body\.name: must be lower-case letters.* \(HTTP 400\)$/)
    assertOneLineError(await cli('operations', 'get', 'not-an-id'), 1, /params\.id: .* \(HTTP 400\)$/)
  })

  it('finds the API and its token in the data directory: VMPLANE_DATA_DIR, .vmplane by default, or api-token beside VMPLANE_URL', async () => {
    const hostIds = stack.info.hosts.map((h) => h.id).sort()
    const hostsOf = (result: CliResult) => {
      assertSucceeded(result)
      return (JSON.parse(result.stdout) as { items: Array<{ id: string }> }).items.map((h) => h.id).sort()
    }
    assert.deepEqual(hostsOf(await runCli(['hosts', 'list', '-o', 'json'], { env: { VMPLANE_DATA_DIR: stack.dataDir } })), hostIds)

    const workDir = await mkdtemp(join(tmpdir(), 'vmplane-cli-'))
    try {
      await symlink(stack.dataDir, join(workDir, '.vmplane'))
      assert.deepEqual(hostsOf(await runCli(['hosts', 'list', '-o', 'json'], { cwd: workDir, env: { VMPLANE_DATA_DIR: undefined } })), hostIds)

      // No stack.json (the stack's is gone once it stops): the URL from the environment, the token from the file.
      const tokenOnly = join(workDir, 'token-only')
      await mkdir(tokenOnly)
      await writeFile(join(tokenOnly, 'api-token'), await readFile(stack.paths.apiTokenFile, 'utf8'))
      const fromFile = await runCli(['hosts', 'list', '-o', 'json'], { env: { VMPLANE_DATA_DIR: tokenOnly, VMPLANE_URL: stack.info.apiUrl } })
      assert.deepEqual(hostsOf(fromFile), hostIds)
    } finally {
      await rm(workDir, { recursive: true, force: true })
    }
  })

  it('networks, images, and an instance with a boot disk, a data disk, an interface at a chosen address and cloud-init', async () => {
    const made = await cli('networks', 'create', 'lab', '--cidr', '10.80.0.0/24', '--outbound', 'nat')
    assertSucceeded(made)
    assert.equal(field(made.stdout, 'outbound'), 'nat')
    assert.match((await cli('networks', 'list')).stdout, /^lab +10\.80\.0\.0\/24 +10\.80\.0\.1 +\d+ +0\/253 /m)
    assertOneLineError(await cli('networks', 'create', 'shut', '--cidr', '10.81.0.0/24', '--outbound', 'open'), 1, /outbound/)
    assert.match((await cli('images', 'list')).stdout, /^debian-12\.qcow2 +qcow2 +2\.0 GiB /m)

    const files = await mkdtemp(join(tmpdir(), 'vmplane-cli-'))
    try {
      const key = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKvmplaneCliTestKeyOnly0123456789abcdef cli@example'
      await writeFile(join(files, 'id.pub'), `# a comment\n${key}\n\n`)
      await writeFile(join(files, 'user-data'), '#cloud-config\nruncmd: [uptime]\n')
      const created = await cli('instances', 'create', '--name', 'cli-vm', ...BOOT, '--image', 'debian-12.qcow2', '--disk', 'data:2',
        '--network', 'lab=10.80.0.7', '--ssh-key-file', join(files, 'id.pub'), '--user-data-file', join(files, 'user-data'), '--wait')
      assertSucceeded(created)
      assert.match(field(created.stdout, 'disks'), /^vda boot 2 GiB from debian-12\.qcow2, ready/)
      assert.match(created.stdout, /vdb data 2 GiB, ready/)
      assert.match(field(created.stdout, 'interfaces'), /^eth0 10\.80\.0\.7\/24 on lab, gateway 10\.80\.0\.1, MAC \S+, TAP vmp[0-9a-f]{12}$/)
      assert.equal(field(created.stdout, 'cloud-init'), '1 SSH key(s), 31 bytes of user-data')
      await waitUntil('the guest applied cloud-init', async () => (await cli('instances', 'console-log', 'cli-vm')).stdout.includes(`authorized ssh key ${key}`),
        { timeoutMs: 10_000, intervalMs: 200 })

      assertOneLineError(await cli('networks', 'delete', 'lab'), 1, /network lab still has 1 live interface\(s\).* \(HTTP 409\)$/)
      assertSucceeded(await cli('instances', 'delete', 'cli-vm', '--grace', '0', '--wait'))
      assertSucceeded(await cli('networks', 'delete', 'lab'))
    } finally {
      await rm(files, { recursive: true, force: true })
    }
  })
})
