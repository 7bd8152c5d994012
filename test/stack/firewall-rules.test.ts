/**
 * Firewall rules (docs/design.md §19) on a stack of two hosts, with real packets from inside the
 * guests: networks `front`, `back` and `side`; `back-1` on host-2 runs an echo service on 8080.
 *
 * - A rule allowing TCP 8080 into `back-1` from `front`: `front-1` (on host-1) connects, routed
 *   by the hosts between the two networks; another port and another network's guest do not get
 *   through (dropped: they time out rather than being refused).
 * - The rule deleted: the host's table loses it within a second of the answer, and `front-1`
 *   no longer gets through.
 * - 100 changes (the rule made and deleted, 50 times each) while `side-1`, a peer no rule
 *   allows, pings `back-1` every 20 ms: not one reply.
 * - Each host has vmplane's two tables and no other.
 * - `back-1`'s agent SIGKILLed and restarted: its host's ruleset is the same, and the rule works.
 * - An egress rule on `front-1` (ICMP to `side`): its pings to `side-1` (which `side`'s ingress
 *   rule lets in) answer, and its connection to `back-1`'s 8080, which `back-1` lets in, no
 *   longer gets out; the egress rule deleted, it does again.
 * - `back-1`, pinged every 20 ms by `front-1` under a rule, moves by live migration to the other
 *   host: the replies go on (the longest gap is printed and at most a second), since the target
 *   had the rules before the VM resumed there; there too `side-1` is still kept out.
 * - A change whose push never ran (its workflow terminated while the worker was frozen) leaves the
 *   host enforcing the old rules until a reconciler pass, which finds the host's policy differs
 *   from the records and sends the current one (`policiesPushed`).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { runCommand } from '../../host-agent/process/command.js'
import { waitFor } from '../../stack/wait.js'
import { GuestConsole } from '../helpers/guest-console.js'
import { checkInvariants } from '../helpers/invariants.js'
import { newInstance, waitForState, type InstanceBody } from '../helpers/instances.js'
import { RECONCILE_ON_DEMAND_ONLY, lastReconcilePass, nextReconcilePass, temporalCli } from '../helpers/operator.js'
import { api, startStack, type TestStack } from '../helpers/stack.js'

const PORT = 8080
const FRONT = '10.81.0.0/24'
const NETWORKS = [{ name: 'front', cidr: FRONT }, { name: 'back', cidr: '10.82.0.0/24' }, { name: 'side', cidr: '10.83.0.0/24' }]

/** The line of a guest's chain that lets ICMP in from `source` (every host's input chain names ICMP too). */
function icmpFrom (source: string): string {
  return `ip saddr ${source} meta l4proto icmp accept`
}

interface Guest { id: string, ip: string, host: string }

describe('firewall rules', { timeout: 10 * 60_000 }, () => {
  let stack: TestStack
  let front: Guest
  let back: Guest
  let side: Guest

  before(async () => {
    stack = await startStack({ hosts: 2, env: { VMPLANE_RECONCILE_SECONDS: RECONCILE_ON_DEMAND_ONLY } })
    for (const network of NETWORKS) assert.equal((await api(stack).post('/v1/networks', network)).status, 201)
    const [host1, host2] = stack.info.hosts.map((host) => host.id)
    front = await guestOn('front', host1!, 'front-1')
    side = await guestOn('side', host1!, 'side-1')
    back = await guestOn('back', host2!, 'back-1')
  })
  after(async () => { await stack?.stop() })

  async function guestOn (network: string, host: string, name: string): Promise<Guest> {
    const created = await api(stack).post<{ instance: InstanceBody }>('/v1/instances', { ...newInstance(name, `console=ttyS0 sim.echo_port=${PORT}`), interfaces: [{ network }] })
    assert.equal(created.status, 202, JSON.stringify(created.body))
    let instance = await waitForState(stack, created.body.instance.id, 'running')
    if (instance.vmm?.hostId !== host) {
      assert.equal((await api(stack).post(`/v1/instances/${instance.id}/migrate?wait=60`, { targetHostId: host })).status, 200)
      instance = await waitForState(stack, instance.id, 'running')
    }
    const { body } = await api(stack).get<{ interfaces: Array<{ ip: string }> }>(`/v1/instances/${instance.id}`)
    return { id: instance.id, ip: body.interfaces[0]!.ip, host }
  }

  async function from<T> (guest: Guest, probe: (shell: GuestConsole) => Promise<T>): Promise<T> {
    const shell = await GuestConsole.open(stack, guest.id)
    try {
      return await probe(shell)
    } finally {
      shell.close()
    }
  }

  async function ruleTable (host: string): Promise<string> {
    const netns = stack.info.hosts.find((h) => h.id === host)!.netns
    return await runCommand('ip', ['netns', 'exec', netns, 'nft', 'list', 'table', 'inet', 'vmplane'])
  }

  it('lets through what a rule allows, from where it allows, and nothing else; not once it is deleted', async () => {
    assert.notEqual(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok', 'no rule: nothing from another network')
    const made = await api(stack).post<{ id: string }>('/v1/firewall-rules', { target: { instance: 'back-1' }, protocol: 'tcp', ports: { from: PORT, to: PORT }, peer: { network: 'front' } })
    assert.equal(made.status, 201, JSON.stringify(made.body))
    await waitFor('the rule on back-1\'s host', async () => (await ruleTable(back.host)).includes(`dport ${PORT}`) ? true : null, { timeoutMs: 10_000 })
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok', 'the rule lets front in on 8080')
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, 7)), 'timed out', 'another port is dropped')
    assert.equal(await from(side, async (shell) => await shell.connect(back.ip, PORT)), 'timed out', 'another network is dropped')

    const deleted = await api(stack).delete(`/v1/firewall-rules/${made.body.id}`)
    assert.equal(deleted.status, 204)
    const answeredAt = Date.now()
    await waitFor('the rule gone from back-1\'s host', async () => (await ruleTable(back.host)).includes(`dport ${PORT}`) ? null : true, { timeoutMs: 5_000, intervalMs: 20 })
    const goneMs = Date.now() - answeredAt
    console.log(`the deleted rule left back-1's host ${goneMs} ms after the API answered`)
    assert.ok(goneMs < 1000, `within a second: ${goneMs} ms`)
    assert.notEqual(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok')
  })

  it('lets no packet of a peer no rule allows through while the rules change 100 times', async () => {
    const pinging = from(side, async (shell) => await shell.ping(back.ip, 600, 20))
    const startedAt = Date.now()
    for (let i = 0; i < 50; i++) {
      const made = await api(stack).post<{ id: string }>('/v1/firewall-rules', { target: { instance: 'back-1' }, protocol: 'any', peer: { network: 'front' } })
      assert.equal(made.status, 201)
      assert.equal((await api(stack).delete(`/v1/firewall-rules/${made.body.id}`)).status, 204)
    }
    const changesMs = Date.now() - startedAt
    const { sent, received } = await pinging
    console.log(`side-1 pinged back-1 ${sent} times (every 20 ms) through 100 rule changes made in ${changesMs} ms: ${received} replies`)
    assert.ok(sent > 100)
    assert.equal(received, 0)
    for (const host of stack.info.hosts) {
      const tables = await runCommand('ip', ['netns', 'exec', host.netns, 'nft', 'list', 'tables'])
      assert.deepEqual(tables.trim().split('\n').sort(), ['table bridge vmplane', 'table inet vmplane'], `${host.id}'s tables`)
    }
  })

  /** Makes a rule; its ID. */
  async function allow (rule: Record<string, unknown>): Promise<string> {
    const made = await api(stack).post<{ id: string }>('/v1/firewall-rules', rule)
    assert.equal(made.status, 201, JSON.stringify(made.body))
    return made.body.id
  }

  /**
   * Deletes the rule, then waits until `host`'s table no longer has `text` (what the rule put
   * there), so the next test starts from rules that are no longer changing: one that looks for
   * the same text must not find this rule's.
   */
  async function remove (ruleId: string, host: string, text: string): Promise<void> {
    assert.equal((await api(stack).delete(`/v1/firewall-rules/${ruleId}`)).status, 204)
    await waitFor(`${text} gone from ${host}'s table`, async () => (await ruleTable(host)).includes(text) ? null : true, { timeoutMs: 10_000 })
  }

  it('lets out of a guest only what its egress rules allow, once one applies to it', async () => {
    const intoBack = await allow({ target: { instance: 'back-1' }, protocol: 'tcp', ports: { from: PORT, to: PORT }, peer: { network: 'front' } })
    const intoSide = await allow({ target: { network: 'side' }, protocol: 'icmp', peer: { network: 'front' } })
    await waitFor('both rules on their hosts', async () => (await ruleTable(back.host)).includes(`dport ${PORT}`) && (await ruleTable(side.host)).includes(icmpFrom(FRONT)) ? true : null, { timeoutMs: 10_000 })
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok', 'no egress rule: front-1 sends anywhere')

    const outOfFront = await allow({ target: { instance: 'front-1' }, direction: 'egress', protocol: 'icmp', peer: { network: 'side' } })
    await waitFor("front-1's egress chain on its host", async () => (await ruleTable(front.host)).includes('return') ? true : null, { timeoutMs: 10_000 })
    assert.equal((await from(front, async (shell) => await shell.ping(side.ip, 3, 100))).received, 3, 'ICMP to side, which its egress rule allows and side lets in')
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'timed out', 'TCP to back, which no egress rule allows')

    await remove(outOfFront, front.host, 'return')
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok', 'the egress rule deleted: front-1 sends anywhere again')
    await remove(intoSide, side.host, icmpFrom(FRONT))
    await remove(intoBack, back.host, `dport ${PORT}`)
  })

  it("keeps a guest's rules through its agent's SIGKILL and restart", async () => {
    const rule = await allow({ target: { instance: 'back-1' }, protocol: 'tcp', ports: { from: PORT, to: PORT }, peer: { network: 'front' } })
    await waitFor('the rule on back-1\'s host', async () => (await ruleTable(back.host)).includes(`dport ${PORT}`) ? true : null, { timeoutMs: 10_000 })
    const host = stack.info.hosts.find((h) => h.id === back.host)!
    const ruleset = async (): Promise<string> => await runCommand('ip', ['netns', 'exec', host.netns, 'nft', 'list', 'ruleset'])
    const before = await ruleset()
    await stack.kill(`agent-${host.id}`)
    await stack.waitForRestart(`agent-${host.id}`)
    await waitFor(`agent-${host.id} back`, async () => (await fetch(`${host.url}/healthz`).then((r) => r.ok, () => false)) ? true : null, { timeoutMs: 30_000 })
    assert.equal(await ruleset(), before, 'the same rules, rebuilt from its records at its start')
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok')
    assert.equal(await from(side, async (shell) => await shell.connect(back.ip, PORT)), 'timed out')
    await remove(rule, back.host, `dport ${PORT}`)
  })

  it("keeps a guest's rules through its live migration, from the target's first packet", async () => {
    const rule = await allow({ target: { instance: 'back-1' }, protocol: 'icmp', peer: { instance: 'front-1' } })
    await waitFor('the rule on back-1\'s host', async () => (await ruleTable(back.host)).includes(icmpFrom(front.ip)) ? true : null, { timeoutMs: 10_000 })
    const target = stack.info.hosts.map((host) => host.id).find((host) => host !== back.host)!
    const shell = await GuestConsole.open(stack, front.id)
    try {
      // 300 pings 20 ms apart: 6 s, which the migration sits inside.
      const pinging = shell.ping(back.ip, 300, 20)
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const moved = await api(stack).post(`/v1/instances/${back.id}/migrate?wait=60`, { targetHostId: target })
      assert.equal(moved.status, 200, JSON.stringify(moved.body))
      const { sent, received, longestGapMs } = await pinging
      console.log(`front-1 pinged back-1 through its migration to ${target}: ${received}/${sent} replies, longest gap ${longestGapMs} ms`)
      assert.equal((await api(stack).get<InstanceBody>(`/v1/instances/${back.id}`)).body.vmm!.hostId, target)
      assert.ok(longestGapMs <= 1000, `the replies went on on the target: longest gap ${longestGapMs} ms`)
      back = { ...back, host: target }
    } finally {
      shell.close()
    }
    assert.equal((await from(side, async (shell) => await shell.ping(back.ip, 3, 100))).received, 0, 'side-1 still kept out on the target')
    await remove(rule, back.host, icmpFrom(front.ip))
  })

  it('sends a host the current rules at the next reconciler pass when a change never reached it', async () => {
    const worker = await stack.kill('worker', 'SIGSTOP')
    let rule: string
    try {
      rule = await allow({ target: { instance: 'back-1' }, protocol: 'tcp', ports: { from: PORT, to: PORT }, peer: { network: 'front' } })
      const running = JSON.parse(await temporalCli(stack, 'workflow', 'list', '--query', "WorkflowType='applyFirewall' AND ExecutionStatus='Running'", '--output', 'json')) as Array<{ execution: { workflowId: string } }>
      assert.ok(running.length > 0, 'the change is waiting for the frozen worker')
      for (const { execution } of running) await temporalCli(stack, 'workflow', 'terminate', '--workflow-id', execution.workflowId, '--reason', 'a push lost, for the test')
    } finally {
      process.kill(worker, 'SIGCONT')
    }
    await new Promise((resolve) => setTimeout(resolve, 2000))
    assert.ok(!(await ruleTable(back.host)).includes(`dport ${PORT}`), 'the host never heard of the change')
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'timed out')

    const previous = (await lastReconcilePass(stack))?.id ?? null
    assert.equal((await api(stack).post('/v1/admin/reconcile')).status, 202)
    const pass = await nextReconcilePass(stack, previous)
    console.log(`the reconciler's pass: ${JSON.stringify(pass.counts)}`)
    assert.ok((pass.counts.policiesPushed ?? 0) >= 1, JSON.stringify(pass))
    assert.equal(pass.counts.segmentsReaped, undefined, 'no segment was left for the reconciler (a migrated VMM took its routed segments with it)')
    assert.ok((await ruleTable(back.host)).includes(`dport ${PORT}`), 'the host enforces the rule now')
    assert.equal(await from(front, async (shell) => await shell.connect(back.ip, PORT)), 'echo ok')
    await remove(rule, back.host, `dport ${PORT}`)
    const report = await checkInvariants(stack.info)
    assert.deepEqual([...report.orphanSegments, ...report.firewallDrift, ...report.orphanTaps, ...report.notAtIntent], [])
  })
})
