#!/usr/bin/env bash
# Several hosts inside this machine: network namespaces mlhost1..N, each with its own address and
# host name, joined by a switch, so that multi-worker runs cross real TCP links that can be shaped
# (tc), made lossy or firewalled (iptables) and cut. Root only. Nothing outside the namespaces is
# touched: the switch is a namespace of its own, so this machine's interfaces, routes and firewall
# never change, and traffic between the hosts stays on their private links.
#
#   scripts/cluster.sh up N [--rate R] [--loss P] [--slots S]   make N hosts (R: 10gbit, 500mbit...)
#   scripts/cluster.sh down                                      remove everything `up` made
#   scripts/cluster.sh shape [--rate R|none] [--loss P] [--host K]   change the links of a cluster
#   scripts/cluster.sh slots S                                   S workers per host in the hostfile
#   scripts/cluster.sh link K down|up                            cut or mend host K's link
#   scripts/cluster.sh block K LOW:HIGH | unblock K              firewall TCP ports on host K
#   scripts/cluster.sh overlay K FILE PATH | overlay K --clear   host K sees FILE at PATH (another install)
#   scripts/cluster.sh run K COMMAND...                          run COMMAND on host K
#   scripts/cluster.sh mpirun ARGS...                            mpirun from host 1 over every host
#   scripts/cluster.sh env                                       the variables that point mpirun at it
#   scripts/cluster.sh pids [K]                                  processes still running on the hosts
#   scripts/cluster.sh check                                     can namespaces be made here? (exit 77 if not)
# Options for every command: --name NAME (default $MIRRORLAB_CLUSTER or mlhost: hosts NAME1..NAMEN).
#
# Open MPI reaches the hosts through a launch agent (plm_rsh_agent) that does what ssh does on a
# real cluster: `agent HOST COMMAND` runs COMMAND on HOST with a login-like environment, and fails
# as ssh does (exit 255) when HOST does not exist or its link is down. `env` prints the MCA
# variables: the hostfile, the agent, TCP between the hosts on the cluster's subnet (shared memory
# inside a host), Open MPI's daemons on ports 30000-30999 and its TCP transport on 20000-20999.
set -euo pipefail

NAME=${MIRRORLAB_CLUSTER:-mlhost}
SUBNET=10.213.7
die() { echo "cluster.sh: $*" >&2; exit 2; }

args=()
while [ $# -gt 0 ]; do
  case $1 in
    --name) NAME=$2; shift 2 ;;
    --name=*) NAME=${1#--name=}; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"
[[ $NAME =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--name must be 1-8 lower-case letters or digits, starting with a letter (got '$NAME')"
STATE=${TMPDIR:-/tmp}/mirrorlab-cluster-$NAME
SW=${NAME}sw

hostsOf() { [ -f "$STATE/hosts" ] && awk '{print $1}' "$STATE/hosts"; }
needUp() { [ -f "$STATE/hosts" ] || die "no cluster '$NAME' is up: run scripts/cluster.sh up N first"; }
hostNs() { # K or a host name -> namespace
  local k=$1
  [[ $k =~ ^[0-9]+$ ]] && k=$NAME$k
  grep -qx "$k" <(hostsOf) || die "no host '$1' in cluster '$NAME' (hosts: $(hostsOf | tr '\n' ' '))"
  echo "$k"
}

check() {
  [ "$(id -u)" = 0 ] || { echo "network namespaces need root (this is uid $(id -u))"; return 77; }
  command -v ip >/dev/null || { echo "ip (iproute2) is not installed"; return 77; }
  command -v unshare >/dev/null || { echo "unshare (util-linux) is not installed"; return 77; }
  local probe=${NAME}probe$$
  probe=${probe:0:15}
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "ip netns add fails here (no CAP_NET_ADMIN or no namespace support)"
    return 77
  fi
  ip netns del "$probe"
}

# tbf on one interface: RATE per direction; the bucket holds 100 us of traffic (at least 128 KiB,
# so that 64 KiB GSO packets pass whole), and 50 ms may queue before a packet is dropped.
shapeDev() { # NS DEV RATE
  local ns=$1 dev=$2 rate=$3
  ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
  [ "$rate" = none ] && return 0
  local bps
  bps=$(tc_rate_bits "$rate")
  local burst=$((bps / 8 / 10000))
  [ $burst -lt 131072 ] && burst=131072
  ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
}
tc_rate_bits() { # 10gbit, 500mbit, 1.5gbit -> bits per second
  local r=${1,,}
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)(k|m|g)?bit$ ]] || die "a rate is a number with kbit, mbit or gbit (e.g. 10gbit, 500mbit), got '$1'"
  local mult=1
  case ${BASH_REMATCH[3]} in k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; esac
  awk -v v="${BASH_REMATCH[1]}" -v m=$mult 'BEGIN { printf "%.0f", v * m }'
}

# Loss on host NS's link, both directions: each packet is dropped with probability P.
lossDev() { # NS P
  local ns=$1 p=$2
  ip netns exec "$ns" iptables -F MLLOSS 2>/dev/null || {
    ip netns exec "$ns" iptables -N MLLOSS
    ip netns exec "$ns" iptables -I INPUT -i ml0 -j MLLOSS
    ip netns exec "$ns" iptables -I OUTPUT -o ml0 -j MLLOSS
  }
  awk -v p="$p" 'BEGIN { exit !(p >= 0 && p < 1) }' || die "--loss is a probability in [0, 1), got '$p'"
  awk -v p="$p" 'BEGIN { exit !(p > 0) }' || return 0
  ip netns exec "$ns" iptables -A MLLOSS -m statistic --mode random --probability "$p" -j DROP
}

needIptables() {
  command -v iptables >/dev/null || die "iptables is not installed (scripts/deps.sh installs it)"
}

up() {
  local n=${1:-} rate=none loss=0 slots=1
  shift || true
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --loss) loss=$2; shift 2 ;;
      --slots) slots=$2; shift 2 ;;
      *) die "unknown option '$1' for up (--rate R, --loss P, --slots S)" ;;
    esac
  done
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "up needs the number of hosts, 1..64 (e.g. up 2)"
  [[ $slots =~ ^[0-9]+$ ]] && [ "$slots" -ge 1 ] || die "--slots is the number of workers per host, 1 or more"
  [ "$rate" = none ] || tc_rate_bits "$rate" >/dev/null
  [ "$loss" = 0 ] || needIptables
  local why
  why=$(check) || die "cannot make namespaces: $why"
  [ -f "$STATE/hosts" ] && die "cluster '$NAME' is already up (scripts/cluster.sh down --name $NAME first)"
  ip netns list | awk '{print $1}' | grep -qE "^${NAME}([0-9]+|sw)$" &&
    die "namespaces named ${NAME}* exist but no cluster state does: remove them with scripts/cluster.sh down --name $NAME"
  trap 'echo "cluster.sh: up failed; removing what it made" >&2; down >/dev/null 2>&1 || true' ERR
  mkdir -p "$STATE"
  : > "$STATE/hosts.tmp"
  ip netns add "$SW"
  ip -n "$SW" link set lo up
  ip -n "$SW" link add br0 type bridge
  ip -n "$SW" link set br0 up
  for k in $(seq 1 "$n"); do
    local ns=$NAME$k
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$SW" link add "sw$k" type veth peer name ml0 netns "$ns"
    ip -n "$SW" link set "sw$k" master br0 up
    ip -n "$ns" addr add "$SUBNET.$k/24" dev ml0
    ip -n "$ns" link set ml0 up
    # A peer that vanished mid-transfer is given up on in seconds, not the default 15 minutes, so
    # that Open MPI's daemons on a cut host end (the settings of this namespace only).
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=6
    shapeDev "$ns" ml0 "$rate"
    shapeDev "$SW" "sw$k" "$rate"
    [ "$loss" = 0 ] || lossDev "$ns" "$loss"
    echo "$ns slots=$slots" >> "$STATE/hosts.tmp"
  done
  writeAgent
  echo "$rate $loss" > "$STATE/links"
  mv "$STATE/hosts.tmp" "$STATE/hosts"
  trap - ERR
  echo "cluster '$NAME' up: $n hosts ($(hostsOf | tr '\n' ' ')), $SUBNET.0/24, links $rate, loss $loss, $slots slot(s) each"
  echo "hostfile $STATE/hosts, launch agent $STATE/agent; run:  scripts/cluster.sh mpirun -np $n ..."
}

writeAgent() {
  cat > "$STATE/agent" <<EOF
#!/bin/sh
# Open MPI's launch agent for cluster '$NAME' (scripts/cluster.sh): \`agent [OPTIONS] HOST COMMAND\`
# runs COMMAND on HOST as ssh would: through the login shell, with a fresh environment, and exit 255
# when HOST does not exist or cannot be reached.
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in $SUBNET.*) host=$NAME\${host#$SUBNET.} ;; esac
if ! grep -q "^\$host " "$STATE/hosts" 2>/dev/null || ! ip netns list | grep -q "^\$host\\( \\|\$\\)"; then
  echo "ssh: Could not resolve hostname \$host: Name or service not known" >&2; exit 255
fi
if ! ip -n "\$host" -o link show ml0 2>/dev/null | grep -q "state UP"; then
  echo "ssh: connect to host \$host port 22: No route to host" >&2; exit 255
fi
exec ip netns exec "\$host" unshare --uts env -i PATH="\$PATH" HOME="\${HOME:-/root}" LANG=C.UTF-8 \\
  /bin/sh -c 'hostname "\$0" && if [ -f "$STATE/\$0.overlay" ]; then while read -r src dst; do mount --bind "\$src" "\$dst" || exit 255; done < "$STATE/\$0.overlay"; fi && eval "\$1"' "\$host" "\$*"
EOF
  chmod +x "$STATE/agent"
}

down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}([0-9]+|sw)$" || true); do
    # Whatever still runs there was started on the cluster (workers, Open MPI's daemons).
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$STATE"
  echo "cluster '$NAME' down"
}

shape() {
  needUp
  local rate="" loss="" host=""
  while [ $# -gt 0 ]; do
    case $1 in
      --rate) rate=$2; shift 2 ;;
      --loss) loss=$2; shift 2 ;;
      --host) host=$2; shift 2 ;;
      *) die "unknown option '$1' for shape (--rate R|none, --loss P, --host K)" ;;
    esac
  done
  [ -n "$loss" ] && [ "$loss" != 0 ] && needIptables
  local hosts
  if [ -n "$host" ]; then hosts=$(hostNs "$host"); else hosts=$(hostsOf); fi
  for ns in $hosts; do
    local k=${ns#"$NAME"}
    if [ -n "$rate" ]; then
      shapeDev "$ns" ml0 "$rate"
      shapeDev "$SW" "sw$k" "$rate"
    fi
    [ -z "$loss" ] || lossDev "$ns" "$loss"
  done
  read -r orate oloss < "$STATE/links"
  [ -n "$host" ] || echo "${rate:-$orate} ${loss:-$oloss}" > "$STATE/links"
  echo "links of $(echo $hosts | tr '\n' ' '): rate ${rate:-unchanged}, loss ${loss:-unchanged}"
}

slots() {
  needUp
  [[ ${1:-} =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] || die "slots S: the number of workers per host, 1 or more"
  sed -i "s/ slots=[0-9]*$/ slots=$1/" "$STATE/hosts"
}

link() {
  needUp
  local ns
  ns=$(hostNs "${1:-}")
  case ${2:-} in
    down | up) ip -n "$ns" link set ml0 "$2" ;;
    *) die "link K down|up" ;;
  esac
}

block() {
  needUp
  needIptables
  local ns range=${2:-}
  ns=$(hostNs "${1:-}")
  [[ $range =~ ^[0-9]+:[0-9]+$ ]] || die "block K LOW:HIGH (TCP ports, e.g. 20000:20999)"
  for chain in INPUT OUTPUT; do
    local dir=-i
    [ $chain = OUTPUT ] && dir=-o
    ip netns exec "$ns" iptables -A $chain $dir ml0 -p tcp --dport "$range" -j DROP
  done
}

unblock() {
  needUp
  local ns
  ns=$(hostNs "${1:-}")
  for chain in INPUT OUTPUT; do
    while ip netns exec "$ns" iptables -S $chain | grep -q -- "-p tcp .*-j DROP"; do
      local rule
      rule=$(ip netns exec "$ns" iptables -S $chain | grep -m1 -- "-p tcp .*-j DROP" | sed 's/^-A //')
      # shellcheck disable=SC2086
      ip netns exec "$ns" iptables -D $rule
    done
  done
}

overlay() {
  needUp
  local ns file=${2:-} path=${3:-}
  ns=$(hostNs "${1:-}")
  if [ "$file" = --clear ]; then
    rm -f "$STATE/$ns.overlay"
    return 0
  fi
  [ -f "$file" ] && [ -e "$path" ] || die "overlay K FILE PATH: FILE must exist here and PATH on every host"
  echo "$(readlink -f "$file") $(readlink -f "$path")" >> "$STATE/$ns.overlay"
}

run() {
  needUp
  local ns
  ns=$(hostNs "${1:-}")
  shift
  [ $# -gt 0 ] || die "run K COMMAND..."
  exec ip netns exec "$ns" unshare --uts /bin/sh -c \
    'hostname "$0" && if [ -f "$1" ]; then while read -r s d; do mount --bind "$s" "$d" || exit 255; done < "$1"; fi && shift && exec "$@"' \
    "$ns" "$STATE/$ns.overlay" "$@"
}

envVars() {
  needUp
  cat <<EOF
export OMPI_MCA_orte_default_hostfile=$STATE/hosts
export OMPI_MCA_plm_rsh_agent=$STATE/agent
export OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_pml=ob1
export OMPI_MCA_btl=tcp,vader,self
export OMPI_MCA_btl_tcp_if_include=$SUBNET.0/24
export OMPI_MCA_oob_tcp_if_include=$SUBNET.0/24
export OMPI_MCA_oob_tcp_dynamic_ipv4_ports=30000-30999
export OMPI_MCA_btl_tcp_port_min_v4=20000
export OMPI_MCA_btl_tcp_port_range_v4=1000
export OMPI_MCA_btl_vader_single_copy_mechanism=none
EOF
}

mpi() {
  needUp
  eval "$(envVars)"
  local root=()
  [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  run 1 mpirun "${root[@]}" "$@"
}

pids() {
  needUp
  local hosts
  if [ -n "${1:-}" ]; then hosts=$(hostNs "$1"); else hosts=$(hostsOf); fi
  for ns in $hosts; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do
      echo "$ns $p $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-120)"
    done
  done
}

cmd=${1:-}
shift || true
case $cmd in
  up) up "$@" ;;
  down) down ;;
  shape) shape "$@" ;;
  slots) slots "$@" ;;
  link) link "$@" ;;
  block) block "$@" ;;
  unblock) unblock "$@" ;;
  overlay) overlay "$@" ;;
  run) run "$@" ;;
  mpirun) mpi "$@" ;;
  env) envVars ;;
  pids) pids "$@" ;;
  check) check ;;
  *) die "usage: scripts/cluster.sh up N [--rate R] [--loss P] [--slots S] | down | shape | slots S | link K down|up | block K LOW:HIGH | unblock K | overlay K FILE PATH | run K CMD... | mpirun ARGS... | env | pids [K] | check   (--name NAME)" ;;
esac
