/**
 * The host firewall's ruleset (host-agent/network/host-firewall.ts) as text: one transaction that
 * replaces both of vmplane's tables whole; every packet for a guest of the host, bridged to its
 * TAP or routed onto its segment, judged by the guest's chain: its network's traffic, then what its
 * rules allow; what a guest sends judged by its egress chain only when egress rules apply to it; bridged frames tracked in a zone of their own; to a guest on another host, its
 * host's judgement; the way out only for networks with NAT; everything else to or from a segment
 * dropped, after conntrack's replies; each guest's TAP sending only as its MAC and address; each
 * gateway kept to its own host. Whether the kernel takes it and what it does to
 * packets is for the stack's tests (test/stack/network-isolation.test.ts).
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { firewallRuleset, hostPlan, type HostPlan } from '../../../host-agent/network/host-firewall.js'

const PLAN: HostPlan = {
  segments: [{ vni: 4097, cidr: '10.2.0.0/24', outbound: 'none' }, { vni: 4096, cidr: '10.1.0.0/24', outbound: 'nat' }],
  guests: [{
    tap: 'vmp0200000000a1',
    mac: '02:00:00:00:00:a1',
    address: '10.2.0.5',
    vni: 4097,
    ingress: [{ protocol: 'tcp', ports: { from: 8080, to: 8080 }, peers: ['10.1.0.0/24'] }, { protocol: 'icmp', peers: ['198.18.0.0/15'] }],
    egress: [{ protocol: 'udp', ports: { from: 53, to: 53 }, peers: ['10.9.0.0/24'] }]
  }, {
    tap: 'vmp0200000000b2',
    mac: '02:00:00:00:00:b2',
    address: '10.1.0.6',
    vni: 4096,
    ingress: [],
    egress: null
  }]
}

describe('the host firewall', () => {
  const rules = firewallRuleset(PLAN)
  const lines = rules.split('\n').map((line) => line.trim())

  it('replaces both tables in one transaction, deleting them first whatever they held', () => {
    assert.deepEqual(lines.slice(0, 4), ['table inet vmplane', 'delete table inet vmplane', 'table bridge vmplane', 'delete table bridge vmplane'])
    assert.equal(rules, firewallRuleset({ segments: [...PLAN.segments].reverse(), guests: PLAN.guests }), 'the same host, the same text')
  })

  it("judges what is for a guest of the host by its chain, lets bridged and routed traffic for other hosts' guests on, NAT networks out, and drops the rest", () => {
    const forward = lines.slice(lines.indexOf('chain forward {') + 2, lines.indexOf('chain out_vmp0200000000a1 {') - 1)
    assert.deepEqual(forward, [
      'ct state established,related accept',
      'meta mark & 0x00000100 == 0x00000100 ip saddr 10.2.0.5 jump out_vmp0200000000a1',
      'meta mark & 0x00000200 == 0x00000200 ip daddr 10.2.0.5 jump in_vmp0200000000a1',
      'oifname "vmpn001001" ip daddr 10.2.0.5 jump in_vmp0200000000a1',
      'meta mark & 0x00000200 == 0x00000200 ip daddr 10.1.0.6 jump in_vmp0200000000b2',
      'oifname "vmpn001000" ip daddr 10.1.0.6 jump in_vmp0200000000b2',
      'meta mark & 0x00000200 == 0x00000200 iifname "vmpn001000" ip saddr 10.1.0.0/24 accept',
      'meta mark & 0x00000200 == 0x00000200 iifname "vmpn001001" ip saddr 10.2.0.0/24 accept',
      'meta mark & 0x00000200 == 0x00000200 drop',
      'iifname "vmpn*" accept',
      'iifname "vmpg*" oifname "vmpn*" accept',
      'iifname "vmpg001000" oifname != "vmpn*" accept',
      'iifname "vmpg*" drop',
      'oifname "vmpn*" drop'
    ])
    const chain = (name: string): string[] => lines.slice(lines.indexOf(`chain ${name} {`) + 1, lines.indexOf('}', lines.indexOf(`chain ${name} {`)))
    assert.deepEqual(chain('in_vmp0200000000a1'), [
      'ip saddr 10.2.0.0/24 accept',
      'ip saddr { 10.1.0.0/24 } meta l4proto tcp th dport 8080 accept',
      'ip saddr { 198.18.0.0/15 } meta l4proto icmp accept',
      'drop'
    ], "what comes in: the guest's network, then its rules, then nothing")
    assert.deepEqual(chain('out_vmp0200000000a1'), [
      'ip daddr 10.2.0.0/24 return',
      'ip daddr { 10.9.0.0/24 } meta l4proto udp th dport 53 return',
      'drop'
    ], "what it sends, once egress rules apply: its network and what they allow go on to the receiver's judgement")
    assert.ok(!rules.includes('out_vmp0200000000b2'), 'a guest no egress rule applies to sends anywhere')
    assert.ok(lines.includes('iifname "vmpn*" ct zone set 1'), 'bridged frames tracked apart from routed ones')
    assert.ok(lines.includes('iifname { "vmp0200000000a1", "vmp0200000000b2" } meta mark set meta mark | 0x00000100'), 'frames bridged from a TAP marked')
    assert.ok(lines.includes('oifname { "vmp0200000000a1", "vmp0200000000b2" } meta mark set meta mark | 0x00000200'), 'frames bridged to a TAP marked')
    assert.ok(lines.includes('iifname "vmpg001000" oifname != "vmpn*" masquerade'))
    assert.ok(!rules.includes('vmpg001001" oifname != "vmpn*"'), 'no way out for a network without NAT')
  })

  it('lets each TAP send only as its MAC and address, and keeps each gateway to its own host', () => {
    assert.ok(lines.includes('iifname "vmp0200000000a1" ether saddr != 02:00:00:00:00:a1 drop'))
    assert.ok(lines.includes('iifname "vmp0200000000a1" ip saddr != 10.2.0.5 drop'))
    assert.ok(lines.includes('iifname "vmp0200000000a1" arp saddr ip != 10.2.0.5 drop'))
    assert.ok(lines.includes('iifname "vmp0200000000a1" arp saddr ether != 02:00:00:00:00:a1 drop'))
    for (const vni of ['001000', '001001']) {
      assert.ok(lines.includes(`iifname "vmpq${vni}" oifname "vmpx${vni}" drop`))
      assert.ok(lines.includes(`iifname "vmpx${vni}" oifname "vmpq${vni}" drop`))
    }
    assert.deepEqual(lines.slice(lines.indexOf('chain input {') + 2, lines.indexOf('chain input {') + 8), [
      'iifname "vmpn*" ct state established,related accept',
      'iifname "vmpn*" icmp type echo-request accept',
      'iifname "vmpn*" drop',
      'iifname "vmpg*" ct state established,related accept',
      'iifname "vmpg*" icmp type echo-request accept',
      'iifname "vmpg*" drop'
    ], 'the host takes only ping and replies from its guests')
  })

  it('plans each segment from the interfaces on it or the route to it; one nobody claims gets no rule', () => {
    const nic = (id: string, address: string, vni: number, outbound: 'nat' | 'none') => ({ id, address, gateway: address.replace(/\.\d+\//, '.1/').split('/')[0]!, vni, outbound })
    const plan = hostPlan([4096, 4097, 4098, 4099], [
      { spec: { interfaces: [nic('00000000-0000-4000-8000-0000000000a1', '10.1.0.5/24', 4096, 'nat')] }, policy: { generation: 3, ingress: [], egress: null, routes: [{ vni: 4098, gateway: '10.3.0.1/24' }] } },
      { spec: { interfaces: [nic('00000000-0000-4000-8000-0000000000a2', '10.2.0.9/24', 4097, 'none')] }, policy: null }
    ])
    assert.deepEqual(plan.segments, [
      { vni: 4096, cidr: '10.1.0.0/24', outbound: 'nat' },
      { vni: 4097, cidr: '10.2.0.0/24', outbound: 'none' },
      { vni: 4098, cidr: '10.3.0.0/24', outbound: 'none' }
    ])
    assert.deepEqual(plan.guests.map((guest) => [guest.tap, guest.address, guest.vni]), [['vmp0200000000a1', '10.1.0.5', 4096], ['vmp0200000000a2', '10.2.0.9', 4097]])
  })
})
