"""Kafka's promises, checked over a `workload.History` after the run. Each check says what it
verifies and returns its violations (an empty list: the promise held in this run).

What it does not verify: records the producer never had acknowledged may or may not be
there (both are allowed); reads below the high watermark only (a consumer never sees more);
leader epochs only as often as the observer sampled Metadata (every 0.5 s per node), so two
leaders of one epoch living shorter than that can pass unseen.
"""

from collections import defaultdict

MAX_SHOWN = 10


def _all_sightings(h):
    """(partition, offset, value, source) for every acknowledgement and every read."""
    for _, p, o, v in h.acks:
        if o is not None and o >= 0:
            yield p, o, v, "ack"
    for _, p, o, v, _ in h.reads:
        yield p, o, v, "group read"
    for p, records in h.final.items():
        for o, v in records.items():
            yield p, o, v, "final read"


def acknowledged_not_lost(h):
    """Every acknowledged record is in the final read of its partition, at the offset it was
    acknowledged with."""
    bad = []
    for _, p, o, v in h.acks:
        if o is None or o < 0:  # no offset to look at: found anywhere in the partition?
            if v not in h.final.get(p, {}).values():
                bad.append(f"ack {v!r} (no offset) in partition {p}: not in the final read")
            continue
        got = h.final.get(p, {}).get(o)
        if got != v:
            bad.append(f"ack {v!r} at {p}:{o}: final read has "
                       f"{'nothing' if got is None else repr(got)} there")
    return bad


def one_offset_per_record(h):
    """No value (each is sent once) sits at two offsets, over acknowledgements and all reads."""
    where = defaultdict(lambda: defaultdict(set))
    for p, o, v, src in _all_sightings(h):
        where[v][(p, o)].add(src)
    return [f"value {v!r} at " + ", ".join(f"{p}:{o} ({'/'.join(sorted(srcs))})"
                                           for (p, o), srcs in sorted(at.items()))
            for v, at in where.items() if len(at) > 1]


def one_record_per_offset(h):
    """No offset holds two values over time: an acknowledgement, a group read and the final
    read of one offset always agree."""
    seen = defaultdict(dict)
    for p, o, v, src in _all_sightings(h):
        seen[(p, o)].setdefault(v, src)
    return [f"{p}:{o} held {dict(vs)}" for (p, o), vs in seen.items() if len(vs) > 1]


def commits_never_backwards(h):
    """A partition's committed group offset never decreases: in the consumer's acknowledged
    commits, in time order, and in the observer's OffsetFetch answers, in time order."""
    bad = []
    for name, series in (("commit", h.commits), ("OffsetFetch", h.committed)):
        last = {}
        for t, p, o in sorted(series):
            if p in last and o < last[p][1]:
                bad.append(f"{name}: partition {p} went from {last[p][1]} to {o} "
                           f"({t - last[p][0]:.1f} s later)")
            last[p] = (t, o)
    return bad


def one_leader_per_epoch(h):
    """Every partition has one leader per leader epoch, over every node's Metadata answers."""
    leaders = defaultdict(set)
    for _, node, p, leader, epoch in h.leaders:
        leaders[(p, epoch)].add((leader, node))
    bad = []
    for (p, epoch), seen in sorted(leaders.items()):
        if len({leader for leader, _ in seen}) > 1:
            bad.append(f"partition {p} epoch {epoch}: leaders (leader, as told by node) "
                       f"{sorted(seen)}")
    return bad


CHECKS = [acknowledged_not_lost, one_offset_per_record, one_record_per_offset,
          commits_never_backwards, one_leader_per_epoch]


def check(h, out=print):
    """Runs every check, prints each promise and its verdict; returns {check name: violations}."""
    out(f"checker: {len(h.acks)} acknowledged, {len(h.reads)} group reads, "
        f"{sum(len(r) for r in h.final.values())} records in the final read, {len(h.commits)} "
        f"commits, {len(h.committed)} OffsetFetch answers, {len(h.leaders)} leader sightings")
    results = {}
    unknown = sum(1 for _, _, o, _ in h.acks if o is None or o < 0)
    if unknown:
        out(f"  note: {unknown} acknowledgements carry no offset (the client reported none)")
    for c in CHECKS:
        bad = c(h)
        results[c.__name__] = bad
        doc = " ".join(c.__doc__.split())
        out(f"  {'ok  ' if not bad else 'FAIL'} {c.__name__}: {doc}")
        for line in bad[:MAX_SHOWN]:
            out(f"       {line}")
        if len(bad) > MAX_SHOWN:
            out(f"       ... {len(bad) - MAX_SHOWN} more")
    return results
