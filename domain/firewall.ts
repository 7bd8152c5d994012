/**
 * Firewall rules' vocabulary (docs/design.md §19): the directions and protocols a rule names. A
 * rule allows traffic into (ingress) or out of (egress) a network's instances or one instance,
 * from or to a peer, beyond what the network's own traffic already may. Ingress from outside the
 * network is denied but for what rules allow; egress is free until an egress rule applies to the
 * instance, and then only what such rules allow leaves it for outside its network.
 */
export const FIREWALL_DIRECTIONS = ['ingress', 'egress'] as const
export type FirewallDirection = typeof FIREWALL_DIRECTIONS[number]

export const FIREWALL_PROTOCOLS = ['tcp', 'udp', 'icmp', 'any'] as const
export type FirewallProtocol = typeof FIREWALL_PROTOCOLS[number]
