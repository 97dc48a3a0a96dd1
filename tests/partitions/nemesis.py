"""Fault injectors (issue #25 point 3, (a)-(e)): each one runs its fault for `fault_s` seconds
on a `netns.Net` and heals; it returns what it did, for the report. Client traffic is never
cut: only packets between node addresses.

    leader-isolated      (a) the leader of partition 0 cut off from every other node
    controller-isolated  (b) the active controller cut off from every other node
    asymmetric           (c) one link drops one way: packets from B to A (the leader of
                             partition 0) are dropped, A to B pass
    flapping             (d) a random node set cut from the rest, healed, again, every 1-3 s
    majorities-ring      (e) Jepsen's: in a random ring each node accepts packets only from the
                             nodes of its majority (itself and its neighbours), so each sees a
                             different majority
"""

import time


def _leader(admin, topic, partition=0):
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def _isolate(net, node):
    others = set(net.ids) - {node}
    grudge = {node: others}
    grudge.update({o: {node} for o in others})
    return grudge


def leader_isolated(net, ctx):
    leader = _leader(ctx.admin, ctx.topic)
    net.apply(_isolate(net, leader))
    time.sleep(ctx.fault_s)
    return [f"node {leader} (leader of {ctx.topic}-0) cut off from nodes "
            f"{sorted(set(net.ids) - {leader})} for {ctx.fault_s:.0f} s"]


def controller_isolated(net, ctx):
    controller = ctx.target.controller(ctx.admin)
    net.apply(_isolate(net, controller))
    time.sleep(ctx.fault_s)
    return [f"node {controller} (active controller) cut off for {ctx.fault_s:.0f} s"]


def asymmetric(net, ctx):
    a = _leader(ctx.admin, ctx.topic)
    b = next(n for n in net.ids if n != a)
    net.apply({a: {b}}, one_way=True)
    time.sleep(ctx.fault_s)
    return [f"node {b} -> node {a} (leader of {ctx.topic}-0) dropped, {a} -> {b} passes, "
            f"for {ctx.fault_s:.0f} s"]


def flapping(net, ctx):
    rng, faults = ctx.rng, []
    deadline = time.monotonic() + ctx.fault_s
    while time.monotonic() < deadline:
        ids = list(net.ids)
        rng.shuffle(ids)
        cut = set(ids[:rng.randint(1, len(ids) // 2)])
        rest = set(net.ids) - cut
        net.apply({**{c: rest for c in cut}, **{r: cut for r in rest}})
        on_s = rng.uniform(1, 3)
        faults.append(f"{sorted(cut)} | {sorted(rest)} for {on_s:.1f} s")
        time.sleep(on_s)
        net.heal()
        time.sleep(rng.uniform(1, 3))
    return faults


def majorities_ring(net, ctx):
    ring = list(net.ids)
    ctx.rng.shuffle(ring)
    n, majority = len(ring), len(ring) // 2 + 1
    grudge = {}
    for i, node in enumerate(ring):
        sees = {ring[(i + k - majority // 2) % n] for k in range(majority)}
        grudge[node] = set(ring) - sees
    net.apply(grudge, one_way=True)
    time.sleep(ctx.fault_s)
    return [f"ring {ring}: node drops packets from " +
            ", ".join(f"{k}<-{sorted(v)}" for k, v in sorted(grudge.items())) +
            f" for {ctx.fault_s:.0f} s"]


SCENARIOS = {
    "leader-isolated": leader_isolated,
    "controller-isolated": controller_isolated,
    "asymmetric": asymmetric,
    "flapping": flapping,
    "majorities-ring": majorities_ring,
}
