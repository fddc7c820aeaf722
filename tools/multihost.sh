#!/usr/bin/env bash
# A cluster of "hosts" on one Linux machine, for multi-host tests of ngraph under Open MPI.
#
# Every host is a network namespace with its own address on a private bridge, its own
# hostname (a UTS namespace) and its own /dev/shm (a mount namespace with a per-host
# directory bound over /dev/shm), so Open MPI and ngraph see separate nodes: the two-level
# allreduce (shared memory inside a host, TCP between hosts) runs for real. Open MPI starts
# its daemons through `multihost.sh agent`, which enters the host's namespaces instead of ssh.
# The bridge lives in a namespace of its own: no address outside the namespaces made here
# (and their loopback) carries traffic.
#
#   tools/multihost.sh up ID [HOSTS [SLOTS]]  make hosts ngmh-ID-h0 .. h(HOSTS-1) (HOSTS 2..8,
#                                           default 2), each with SLOTS rank slots (1..8, default 2)
#   tools/multihost.sh mpirun ID ARGS...    mpirun on host h0 across all hosts, SLOTS slots each
#   tools/multihost.sh rate ID RATE|off     limit every host's link to RATE (tc's units: 1gbit,
#                                           500mbit) in both directions with a token bucket (tbf),
#                                           or remove the limit; `rate ID` prints the qdiscs
#   tools/multihost.sh addr ID HOST         the host's address on the bridge
#   tools/multihost.sh mpiargs ID           the mpirun options `mpirun` adds (not the hostfile),
#                                           shell-quoted on one line (for ngraph.launch --mpi-args)
#   tools/multihost.sh exec ID HOST CMD...  run CMD on a host (h0, h1, ...)
#   tools/multihost.sh link ID HOST up|down take a host's link up or down
#   tools/multihost.sh pids ID HOST         processes running on a host
#   tools/multihost.sh shm ID HOST          the host's /dev/shm directory (outside the host)
#   tools/multihost.sh down ID              kill the hosts' processes, remove everything
#   tools/multihost.sh clean                remove the test clusters whose creator has exited
#   tools/multihost.sh check                exit 0 if namespaces can be made here, else say why
#
# ID is a short token of letters and digits. Tests use p<PID>n<K> (PID: the test process), which
# `clean` removes once that process is gone; other clusters only go with `down`. Needs root, iproute2
# (ip netns), util-linux (unshare) and Open MPI's mpirun. Addresses: 10.213.<n>.0/24 where n
# is derived from ID, host i at .(10 + i).
set -euo pipefail

prefix=ngmh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$here/$(basename "${BASH_SOURCE[0]}")"
# Each cluster has a tmpfs of its own holding every host's /dev/shm (bound over /dev/shm
# inside the host), outside /dev/shm itself so hosts started from inside another host see it.
# Its size is a limit, not a reservation: 1 GiB per rank slot ($NGRAPH_MULTIHOST_SHM_GB per
# slot to change it), so ResNet-50's node regions (204 MB of gradients and weights a host, and the
# optimizer state beside them) fit on 8 hosts; a region that does not fit makes ngraph fall
# back to MPI's allreduce (2 GiB for the whole cluster did not hold them on 8 hosts).
state_root=${TMPDIR:-/tmp}
shm_dir() { echo "$state_root/$prefix-$1.shm"; }

die() {
  echo "multihost.sh: $*" >&2
  exit 2
}

check_id() {
  [[ "${1:-}" =~ ^[A-Za-z0-9]{1,12}$ ]] || die "ID must be 1-12 letters or digits, got '${1:-}'"
}

# The /24 of a cluster: 10.213.N.0 with N from the ID, so clusters made at once do not share
# a subnet (each has its own bridge anyway; the subnet only keeps logs unambiguous).
subnet() { echo "10.213.$(($(cksum <<<"$1" | cut -d' ' -f1) % 250 + 1))"; }

hosts_of() { ip netns list | awk '{print $1}' | grep -E "^$prefix-$1-h[0-9]+$" | sort -V || true; }

cmd_check() {
  [[ $(id -u) == 0 ]] || {
    echo "network namespaces need root (running as uid $(id -u))"
    return 1
  }
  for tool in ip unshare mpirun; do
    command -v "$tool" >/dev/null || {
      echo "$tool is not installed"
      return 1
    }
  done
  local probe="$prefix-probe$$"
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "ip netns add is not permitted here: $err"
    return 1
  fi
  local ok=0
  ip netns exec "$probe" unshare --uts --mount sh -c \
    'hostname ngmh-probe && mount -t tmpfs tmpfs /dev/shm' >/dev/null 2>&1 || ok=$?
  ip netns del "$probe"
  if ((ok != 0)); then
    echo "unshare --uts --mount with a tmpfs mount is not permitted inside a namespace"
    return 1
  fi
}

cmd_up() {
  local id=$1 n=${2:-2} slots=${3:-2}
  check_id "$id"
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 2 && n <= 8)) || die "HOSTS must be 2..8, got '$n'"
  [[ "$slots" =~ ^[0-9]+$ ]] && ((slots >= 1 && slots <= 8)) || die "SLOTS must be 1..8, got '$slots'"
  [[ -z "$(hosts_of "$id")" ]] || die "cluster $id exists; run: $self down $id"
  local net sw="$prefix-$id-sw"
  net=$(subnet "$id")
  trap 'cmd_down "$id" >/dev/null 2>&1' ERR
  local gb=${NGRAPH_MULTIHOST_SHM_GB:-1}
  [[ "$gb" =~ ^[0-9]+$ ]] && ((10#$gb >= 1)) || die "NGRAPH_MULTIHOST_SHM_GB must be a whole number >= 1, got '$gb'"
  local shm
  shm=$(shm_dir "$id")
  mkdir -p "$shm"
  mount -t tmpfs -o "size=$((10#$gb * n * slots))g,mode=1777" "$prefix-$id" "$shm"
  echo "$slots" >"$shm/slots"
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  ip -n "$sw" link set lo up
  for ((i = 0; i < n; i++)); do
    local ns="$prefix-$id-h$i"
    ip netns add "$ns"
    # The veth is made inside the host's namespace, its peer moved to the switch.
    ip -n "$ns" link add eth0 type veth peer name "port$i"
    ip -n "$ns" link set "port$i" netns "$sw"
    ip -n "$sw" link set "port$i" master br0 up
    ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "$shm/h$i"
    chmod 1777 "$shm/h$i"
  done
  trap - ERR
  echo "cluster $id: $n hosts of $slots slots on $net.0/24: $(hosts_of "$id" | tr '\n' ' ')"
}

# Runs "$@" inside host NS with its own hostname (the namespace's name) and /dev/shm.
enter() {
  local ns=$1
  shift
  [[ -n "$(ip netns list | awk -v n="$ns" '$1 == n')" ]] || die "no host $ns (is the cluster up?)"
  # unshare --fork: the new mount and UTS namespaces belong to a child, which execs "$@".
  exec ip netns exec "$ns" unshare --uts --mount --propagation private --fork \
    "$self" _inside "$ns" "$@"
}

cmd__inside() {
  local ns=$1
  shift
  hostname "$ns"
  local id=${ns#"$prefix"-}
  mount --bind "$(shm_dir "${id%-*}")/${ns##*-}" /dev/shm
  exec "$@"
}

cmd_exec() {
  local id=$1 host=$2
  shift 2
  check_id "$id"
  enter "$prefix-$id-$host" "$@"
}

# Open MPI's launch agent: called as `agent [options] HOST COMMAND...` where COMMAND is a
# shell command line (the orted), as ssh would get it.
cmd_agent() {
  while [[ "${1:-}" == -* ]]; do shift; done
  local host=$1
  shift
  [[ "$host" == "$prefix"-* ]] || die "agent: '$host' is not a multihost.sh host"
  enter "$host" /bin/sh -c "$*"
}

# The mpirun options of a cluster, into the array mpi_options. Open MPI: daemons through the
# agent, out-of-band and TCP traffic on the bridge only, shared memory (vader) inside a host. TCP
# keepalive on the daemons' connections, so mpirun notices a host whose link is down within about
# 5 s (by default only after 300 s + 9 x 20 s: it would wait that long to end the job). -x passes
# ngraph's settings to every rank.
set_mpi_options() {
  local net
  net=$(subnet "$1")
  mpi_options=(--allow-run-as-root --mca plm_rsh_agent "$self agent"
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24"
    --mca btl self,vader,tcp
    --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
  for v in $(compgen -e | grep -E '^(NGRAPH_|OMP_NUM_THREADS$|PYTHONPATH$)' || true); do
    mpi_options+=(-x "$v")
  done
}

cmd_mpirun() {
  local id=$1
  shift
  check_id "$id"
  local hosts hostfile
  hosts=$(hosts_of "$id")
  [[ -n "$hosts" ]] || die "cluster $id is not up; run: $self up $id"
  hostfile="$(shm_dir "$id")/hostfile"
  local slots
  slots=$(cat "$(shm_dir "$id")/slots")
  for h in $hosts; do echo "$h slots=$slots"; done >"$hostfile"
  set_mpi_options "$id"
  enter "$prefix-$id-h0" mpirun --hostfile "$hostfile" "${mpi_options[@]}" "$@"
}

cmd_mpiargs() {
  check_id "$1"
  set_mpi_options "$1"
  printf '%q ' "${mpi_options[@]}"
  echo
}

cmd_link() {
  local id=$1 host=$2 state=$3
  check_id "$id"
  [[ "$state" == up || "$state" == down ]] || die "link state must be up or down, got '$state'"
  ip -n "$prefix-$id-$host" link set eth0 "$state"
}

# A token bucket on both ends of every host's veth: eth0 inside the host shapes what the host
# sends, its peer port on the bridge what it receives. The bucket holds 1 ms of traffic (at
# least 64 KiB, a GSO segment's worth, so no packet is larger than the bucket) and the queue
# 20 ms more: a full-duplex link of RATE per host. (netem's rate does not work here.)
cmd_rate() {
  local id=$1 rate=${2:-}
  check_id "$id"
  local hosts sw="$prefix-$id-sw" i=0 ns d dev
  hosts=$(hosts_of "$id")
  [[ -n "$hosts" ]] || die "cluster $id is not up; run: $self up $id"
  if [[ -z "$rate" ]]; then
    for h in $hosts; do
      echo "${h##*-}: out $(tc -n "$h" qdisc show dev eth0 | head -1)"
      echo "${h##*-}: in  $(tc -n "$sw" qdisc show dev "port${h##*-h}" | head -1)"
    done
    return
  fi
  local bits=0
  if [[ "$rate" != off ]]; then
    [[ "$rate" =~ ^([0-9]+)(k|m|g)?bit$ ]] || die "RATE must be like 1gbit, 500mbit or off, got '$rate'"
    local unit=${BASH_REMATCH[2]}
    bits=${BASH_REMATCH[1]}
    case "$unit" in k) bits=$((bits * 1000)) ;; m) bits=$((bits * 1000000)) ;; g) bits=$((bits * 1000000000)) ;; esac
    ((bits >= 1000000)) || die "RATE must be at least 1mbit, got '$rate'"
  fi
  local burst=$((bits / 8 / 1000))
  ((burst >= 65536)) || burst=65536
  for h in $hosts; do
    i=${h##*-h}
    for dev in "$h eth0" "$sw port$i"; do
      read -r ns d <<<"$dev"
      tc -n "$ns" qdisc del dev "$d" root 2>/dev/null || true
      if [[ "$rate" != off ]]; then
        tc -n "$ns" qdisc add dev "$d" root tbf rate "$rate" burst "$burst" latency 20ms
      fi
    done
  done
}

cmd_addr() {
  check_id "$1"
  local ns="$prefix-$1-$2"
  ip -n "$ns" -o -4 addr show dev eth0 | awk '{split($4, a, "/"); print a[1]}'
}

cmd_pids() {
  check_id "$1"
  ip netns pids "$prefix-$1-$2"
}

cmd_shm() {
  check_id "$1"
  echo "$(shm_dir "$1")/$2"
}

cmd_down() {
  local id=$1
  check_id "$id"
  local ns
  for ns in $(hosts_of "$id"); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  done
  for ns in $(hosts_of "$id") "$prefix-$id-sw"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  local shm
  shm=$(shm_dir "$id")
  if mountpoint -q "$shm"; then umount "$shm" 2>/dev/null || umount -l "$shm"; fi
  rmdir "$shm" 2>/dev/null || true
}

# A test cluster (p<PID>n<K>) whose test process has exited.
stale() { [[ "$1" =~ ^p([0-9]+)n[0-9]+$ ]] && ! kill -0 "${BASH_REMATCH[1]}" 2>/dev/null; }

cmd_clean() {
  local ns id
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-[A-Za-z0-9]+-(sw|h[0-9]+)$" || true); do
    id=${ns#"$prefix"-}
    id=${id%-*}
    if stale "$id"; then cmd_down "$id"; fi
  done
  for d in "$state_root/$prefix"-*.shm; do
    [[ -e "$d" ]] || continue
    id=${d#"$state_root/$prefix"-}
    id=${id%.shm}
    if stale "$id"; then cmd_down "$id"; fi
  done
}

cmd=${1:-}
[[ -n "$cmd" ]] || die "usage: see the comment at the top of $self"
shift
case "$cmd" in
  up | down | exec | agent | mpirun | mpiargs | link | rate | addr | pids | shm | clean | check | _inside) "cmd_$cmd" "$@" ;;
  *) die "unknown command '$cmd' (see the comment at the top of $self)" ;;
esac
