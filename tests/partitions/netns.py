"""Network namespaces for a partition test (issue #25, point 3): one namespace per node, each
with a veth into a bridge in the root namespace, and nftables rules inside each node's
namespace that drop traffic between node addresses.

    net = Net(nodes=3)
    net.setup()                      # namespaces sl<pid>-n1.., bridge, addresses 10.251.0.N/24
    net.apply({2: {1, 3}})           # node 2 drops packets from nodes 1 and 3
    net.heal()                       # every node accepts every node again
    net.teardown()                   # removes everything setup made (also after a failure)

Addresses: node N is 10.251.0.N on its namespace's `eth0`; the bridge holds 10.251.0.254 (another `subnet` for a concurrent run) in
the root namespace, where the clients run. The range exists only on the devices made here and
is routed nowhere else. A fault is a "grudge" (Jepsen's word): for each node, the nodes whose
packets it drops, inbound and outbound alike, so a node drops both what such a node sends it
and what it would send that node. An asymmetric link drops in one direction only
(`apply(..., one_way=True)`): node N then drops only what the nodes of its grudge send it.
Client traffic (to and from 10.251.0.254) is never dropped.
"""

import os
import shutil
import subprocess

SUBNET = "10.251.0"
TABLE = "sluice_nemesis"
PACKAGES = {"ip": "iproute2", "nft": "nftables", "iptables": "iptables"}


class NetnsUnavailable(Exception):
    """The kernel or the tools refuse namespaces: the message is the exact error."""


def ensure_tools():
    """Installs iproute2, nftables and iptables (Debian packages) where missing."""
    missing = [pkg for tool, pkg in PACKAGES.items() if shutil.which(tool) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise NetnsUnavailable(f"{' '.join(missing)} missing and not root to install them")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=True)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def _run(cmd, stdin=None):
    proc = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        raise NetnsUnavailable(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                               f"{proc.stdout.strip()}")
    return proc.stdout


class Net:
    def __init__(self, nodes, tag=None, subnet=SUBNET):
        """`subnet`: the first three octets; two runs at once need two (10.251.0, 10.251.1)."""
        self.subnet = subnet
        self.ids = list(range(1, nodes + 1))
        self.tag = tag or f"sl{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.made = []  # what to remove, last made first
        self.grudge = {}

    def ns(self, node_id):
        return f"{self.tag}-n{node_id}"

    def ip(self, node_id):
        return f"{self.subnet}.{node_id}"

    def exec_prefix(self, node_id):
        return ["ip", "netns", "exec", self.ns(node_id)]

    def setup(self):
        """Creates the namespaces, veths and bridge; NetnsUnavailable with the kernel's exact
        error when it refuses (everything made so far is removed again)."""
        ensure_tools()
        try:
            _run(["ip", "link", "add", self.bridge, "type", "bridge"])
            self.made.append(["ip", "link", "del", self.bridge])
            _run(["ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge])
            _run(["ip", "link", "set", self.bridge, "up"])
            for n in self.ids:
                self._add_node(n)
            for n in self.ids:
                self._nft(n, self._ruleset(n, set(), False))
        except Exception:
            self.teardown()
            raise
        return self

    def _add_node(self, n):
        ns, host_if = self.ns(n), f"{self.tag}v{n}"
        _run(["ip", "netns", "add", ns])
        self.made.append(["ip", "netns", "del", ns])
        _run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", ns])
        self.made.append(["ip", "link", "del", host_if])
        _run(["ip", "link", "set", host_if, "master", self.bridge, "up"])
        inside = self.exec_prefix(n)
        _run(inside + ["ip", "addr", "add", f"{self.ip(n)}/24", "dev", "eth0"])
        _run(inside + ["ip", "link", "set", "eth0", "up"])
        _run(inside + ["ip", "link", "set", "lo", "up"])

    def _ruleset(self, n, peers, one_way):
        addrs = ", ".join(self.ip(p) for p in sorted(peers))
        rules_in = f"ip saddr {{ {addrs} }} drop" if peers else ""
        rules_out = f"ip daddr {{ {addrs} }} drop" if peers and not one_way else ""
        return (f"table inet {TABLE}\ndelete table inet {TABLE}\n"
                f"table inet {TABLE} {{\n"
                f"  chain input {{\n    type filter hook input priority 0; policy accept;\n    {rules_in}\n  }}\n"
                f"  chain output {{\n    type filter hook output priority 0; policy accept;\n    {rules_out}\n  }}\n"
                f"}}\n")

    def _nft(self, n, ruleset):
        _run(self.exec_prefix(n) + ["nft", "-f", "-"], stdin=ruleset)

    def apply(self, grudge, one_way=False):
        """`grudge`: {node: nodes whose packets it drops}; nodes not named drop nothing."""
        for n in self.ids:
            peers = set(grudge.get(n, ())) - {n}
            self._nft(n, self._ruleset(n, peers, one_way))
        self.grudge = {n: set(v) for n, v in grudge.items() if v}

    def heal(self):
        self.apply({})

    def teardown(self):
        while self.made:
            subprocess.run(self.made.pop(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def __enter__(self):
        return self.setup()

    def __exit__(self, *exc):
        self.teardown()
