/**
 * The host firewall's ruleset (host-agent/network/host-firewall.ts) as text: one transaction that
 * replaces both of vmplane's tables whole; each segment's own traffic allowed; the way out only
 * for networks with NAT; everything else to or from a segment dropped, after conntrack's replies;
 * the gateway's MAC kept off the VXLAN devices. Whether the kernel takes it and what it does to
 * packets is for the stack's tests (test/stack/network-isolation.test.ts).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { firewallRuleset, segmentPolicies } from '../../../host-agent/network/host-firewall.js'

describe('the host firewall', () => {
  const rules = firewallRuleset([{ vni: 4097, outbound: 'none' }, { vni: 4096, outbound: 'nat' }])
  const lines = rules.split('\n').map((line) => line.trim())

  it('replaces both tables in one transaction, deleting them first whatever they held', () => {
    assert.deepEqual(lines.slice(0, 4), ['table inet vmplane', 'delete table inet vmplane', 'table bridge vmplane', 'delete table bridge vmplane'])
    assert.equal(rules, firewallRuleset([{ vni: 4096, outbound: 'nat' }, { vni: 4097, outbound: 'none' }]), 'the same host, the same text')
  })

  it("lets each network's own traffic through its bridge, replies back, NAT networks out, and drops the rest", () => {
    const forward = lines.slice(lines.indexOf('chain forward {') + 2, lines.indexOf('chain postrouting {') - 1)
    assert.deepEqual(forward, [
      'iifname "vmpn001000" oifname "vmpn001000" accept',
      'iifname "vmpn001001" oifname "vmpn001001" accept',
      'ct state established,related accept',
      'iifname "vmpn001000" oifname != "vmpn*" accept',
      'iifname "vmpn*" drop',
      'oifname "vmpn*" drop'
    ])
    assert.ok(lines.includes('iifname "vmpn001000" oifname != "vmpn*" masquerade'))
    assert.ok(!rules.includes('vmpn001001" oifname != "vmpn*"'), 'no way out for a network without NAT')
  })

  it("keeps each host's gateway to its own guests", () => {
    assert.ok(lines.includes('oifname "vmpx001000" ether saddr 02:76:70:00:10:00 drop'))
    assert.ok(lines.includes('oifname "vmpx001001" ether saddr 02:76:70:00:10:01 drop'))
    assert.deepEqual(lines.filter((line) => line.startsWith('iifname "vmpn*"') && line.includes('input') === false).slice(0, 3), [
      'iifname "vmpn*" ct state established,related accept',
      'iifname "vmpn*" icmp type echo-request accept',
      'iifname "vmpn*" drop'
    ], 'the host takes only ping and replies from its guests')
  })

  it("takes each segment's way out from its live interfaces; a segment none claims has none", () => {
    assert.deepEqual(segmentPolicies([4096, 4097, 4098], [{ vni: 4096, outbound: 'nat' }, { vni: 4097, outbound: 'none' }]), [
      { vni: 4096, outbound: 'nat' }, { vni: 4097, outbound: 'none' }, { vni: 4098, outbound: 'none' }
    ])
  })
})
