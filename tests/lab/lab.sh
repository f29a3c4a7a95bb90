#!/usr/bin/env bash
# The lab: a small fleet of systemd containers that act as GPU hosts, reached over SSH as a real fleet is
# (docs/lab.md). Their CPUs and NUMA nodes are this machine's; their GPUs are the NVML simulator's.
# Usage: [GPUFLEET_LAB_HOSTS=FILE] tests/lab/lab.sh up|down|status
#   up      create what is missing (or out of date), wait until every host answers ssh, write
#           build/lab/inventory/ and print its path; quick and changes nothing when all is up
#   down    remove the lab's containers, its podman network, build/lab/ and the reports make site wrote of it
#           (examples/hk-fleet/reports/)
#   status  each host: its container's state, address and whether ssh answers
# GPUFLEET_LAB_HOSTS: a file with another fleet, in the columns of the table below (bench/fleet.py sizes the lab
# with it); up makes the lab that fleet, removing hosts that are not in it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
testbed=$repo/tests/testbed
lab=$repo/build/lab
image=localhost/gpufleet-testbed:latest
network=gpufleet-lab
subnet=10.213.7.0/24
label=gpufleet-lab=1
# What lab hosts run with: the simulator's drop-in pynvml and what it reads.
sim_files=(pynvml.py gpu_models.json simctl.py render_tree.py journalctl)
# Debian's prometheus and prometheus-node-exporter with their dependencies (tests/testbed/prometheus_repo.sh), the
# only Debian packages a lab host can install: every host runs node_exporter, as a site's base image would, and the
# monitoring host installs Prometheus from it. Kept across lab.sh down, as the monitoring scenario's.
debian_repo=$repo/build/monitoring-apt-repo

# The fleet. Names, groups and addresses are a contract (make site, examples/hk-fleet): change them together.
# The last column is the host description in tests/nvml_sim/hosts/ whose GPUs the host simulates (a description
# without a driver: no host.json, so NVML's library is missing, as on a host without the driver).
# host        address      data centre  rack        class         GPUs from
hosts_table='
hk1-a100-01   10.213.7.11  dc_hk1       hk1_rack_a  a100_pcie_4x  reference-a100
hk1-a100-02   10.213.7.12  dc_hk1       hk1_rack_a  a100_pcie_4x  reference-a100
hk2-h100-01   10.213.7.21  dc_hk2       hk2_rack_b  h100_sxm_8x   dgx-h100
hk2-h200-01   10.213.7.31  dc_hk2       hk2_rack_c  h200_nvl_1x   single-h200
hk2-cpu-01    10.213.7.32  dc_hk2       hk2_rack_c  cpu_only      cpu-only
'

# shellcheck source=tests/testbed/lib.sh
. "$testbed/lib.sh"

say() { echo "lab.sh: $*"; }
die() { echo "lab.sh: $*" >&2; exit 1; }

if [ -n "${GPUFLEET_LAB_HOSTS:-}" ]; then
  [ -f "$GPUFLEET_LAB_HOSTS" ] || die "GPUFLEET_LAB_HOSTS=$GPUFLEET_LAB_HOSTS is not a file; give a hosts table or unset it"
  hosts_table=$(grep -v '^[[:space:]]*#' "$GPUFLEET_LAB_HOSTS" || true)
fi

# The machine-wide lock of tests/testbed/molecule.sh, held while the image is built and containers are created
# or removed. Nothing podman starts may inherit it (9>&- on every podman call), or a container would hold it.
lock() {
  exec 9>"${TMPDIR:-/tmp}/gpufleet-molecule.lock"
  if ! flock -n 9; then
    say "waiting for the test-bed lock (a molecule scenario or another lab.sh is running)"
    flock -w 7200 9 || die "the test-bed lock was held for 2 hours"
  fi
}
unlock() { flock -u 9; exec 9>&-; }
pm() { podman "$@" 9>&-; }

# remove_containers NAME...: podman can fail to remove a container that --restart=always is restarting as it stops
# it ("container state improper"); a later try finds it stopped. Fails only if one is still there after five.
remove_containers() {
  local attempt left
  for attempt in 1 2 3 4 5; do
    pm rm -f -t 2 "$@" >/dev/null 2>&1 || true
    left=$(pm ps -a --format '{{.Names}}' | grep -xF -f <(printf '%s\n' "$@") || true)
    [ -n "$left" ] || return 0
    sleep "$attempt"
  done
  die "podman cannot remove $(echo "$left" | xargs); see podman ps -a, and remove them with podman rm -f"
}

hosts() { echo "$hosts_table" | grep -v '^[[:space:]]*$'; }

# check_table: every line names a host, its address in the lab's subnet, its groups and a host description, with
# no name or address twice; nothing is made from a table with a mistake in it.
check_table() {
  local problems
  problems=$(hosts | awk -v sims="$repo/tests/nvml_sim/hosts" '
    function bad(why) { printf "  line %d (%s): %s\n", NR, $0, why; failed = 1 }
    NF != 6 { bad("6 columns expected: host address data-centre rack class GPUs-from"); next }
    $1 !~ /^[a-z0-9][a-z0-9-]*$/ || length($1) > 50 { bad("host name: lower-case letters, digits and -") }
    $2 !~ /^10\.213\.7\.[0-9]+$/ || substr($2, 10) + 0 < 2 || substr($2, 10) + 0 > 254 {
      bad("address: 10.213.7.2 to 10.213.7.254 (the lab network; .1 is its gateway)") }
    seen_name[$1]++ { bad("host " $1 " is listed twice") }
    seen_address[$2]++ { bad("address " $2 " is listed twice") }
    $3 !~ /^[a-z0-9_]+$/ || $4 !~ /^[a-z0-9_]+$/ { bad("group names: lower-case letters, digits and _") }
    $5 !~ /^(a100_pcie_4x|h100_sxm_8x|h200_nvl_1x|cpu_only)$/ { bad("class: a100_pcie_4x, h100_sxm_8x, h200_nvl_1x or cpu_only") }
    { file = sims "/" $6 ".json"; if ($6 !~ /^[a-z0-9-]+$/ || (getline line < file) < 0) bad("no host description tests/nvml_sim/hosts/" $6 ".json"); close(file) }
    END { if (NR == 0) print "  the table has no host" }') || true
  [ -z "$problems" ] || die "the hosts table${GPUFLEET_LAB_HOSTS:+ in $GPUFLEET_LAB_HOSTS} has mistakes; fix them:
$problems"
}
container() { echo "gpufleet-lab-$1"; }

ssh_opts() {
  echo -i "$lab/ssh/id_ed25519" -o UserKnownHostsFile="$lab/ssh/known_hosts" -o StrictHostKeyChecking=yes \
       -o BatchMode=yes -o ConnectTimeout=3 -o LogLevel=ERROR
}
ssh_answers() { # ssh_answers ADDRESS
  # shellcheck disable=SC2046  # ssh_opts is a word list without spaces inside words
  ssh $(ssh_opts) "root@$1" true </dev/null >/dev/null 2>&1
}

network_up() {
  local have
  if pm network exists "$network"; then
    have=$(pm network inspect "$network" --format '{{range .Subnets}}{{.Subnet}} {{end}}' | xargs)
    [ "$have" = "$subnet" ] || die "podman network $network exists with subnet '$have', not $subnet; remove it (podman network rm $network) or run lab.sh down"
  else
    pm network create --subnet "$subnet" --label "$label" "$network" >/dev/null
  fi
}

# config_of HOST ADDRESS SOURCE: a hash of everything a host is made from. A container whose label differs is
# out of date and is made again (its state goes with it, as with a reinstalled machine).
config_of() {
  local host=$1 address=$2 source=$3 description=$lab/hosts/$1.json
  {
    echo "$host $address $source $image_id"
    if [ -f "$description" ]; then sha256sum <"$description"; else echo none; fi
    (cd "$repo/tests/nvml_sim" && sha256sum "${sim_files[@]}")
    (cd "$here/host" && find . -type f -printf '%p %m\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat)
    sha256sum <"$lab/ssh/id_ed25519.pub"
    sha256sum <"$lab/aptrepos/repo.json"
    cat "$debian_repo/.versions"
    sha256sum <"$here/lab.sh"
  } | sha256sum | cut -c1-16
}

create() { # create HOST ADDRESS GPUS CONFIG
  local host=$1 address=$2 gpus=$3 config=$4 name mac i
  local -a devices=()
  name=$(container "$host")
  if [ "$gpus" -gt 0 ]; then
    # NVIDIA's device nodes, as /dev/null's device: services can open them, and their sandboxes must allow it.
    devices+=(--device /dev/null:/dev/nvidiactl:rwm)
    for ((i = 0; i < gpus; i++)); do devices+=(--device "/dev/null:/dev/nvidia$i:rwm"); done
  fi
  # A fixed MAC address, derived from the address: a host made again is reachable at once, not only once this
  # machine's neighbour table has forgotten the old container's MAC address.
  local -a octets
  IFS=. read -r -a octets <<<"$address"
  mac=$(printf '02:6c:%02x:%02x:%02x:%02x' "${octets[@]}")
  remove_containers "$name"
  # --restart=always: a reboot (systemd exits) boots the host again, as ansible.builtin.reboot expects.
  # SYS_PTRACE: root on a host can read any process's /proc files (numa_maps for the audit, fds and environment for
  # the lab's stand-in driver); podman's default capabilities leave it out.
  pm run -d --name "$name" --hostname "$host" --label "$label" --label "gpufleet-lab.config=$config" \
    --network "$network" --ip "$address" --mac-address "$mac" --systemd=always --restart=always --cap-add=SYS_PTRACE "${devices[@]}" \
    --volume "$lab/aptrepos:/srv/gpufleet-repos:ro" --volume "$debian_repo:/srv/gpufleet-debian:ro" \
    "$image" /sbin/init >/dev/null
}

wait_booted() { # wait_booted CONTAINER: until systemd has finished booting (running, or degraded)
  local deadline=$((SECONDS + 120)) state
  while :; do
    state=$(pm exec "$1" systemctl is-system-running --wait 2>/dev/null || true)
    case "$state" in running|degraded) return 0 ;; esac
    [ "$SECONDS" -lt "$deadline" ] || die "$1: systemd did not finish booting in 120 s (state '$state')"
    sleep 1
  done
}

provision() { # provision HOST CONFIG: everything inside the container; the last step marks it done
  local host=$1 config=$2 name stage
  name=$(container "$host")
  stage=$lab/stage/$host
  rm -rf "$stage"
  mkdir -p "$stage/opt/gpufleet-nvml-sim" "$stage/root/.ssh"
  (cd "$repo/tests/nvml_sim" && cp "${sim_files[@]}" "$stage/opt/gpufleet-nvml-sim/")
  # tests/lab/host/: files every lab host gets (its boot unit and what that runs).
  cp -a "$here/host/." "$stage/"
  if [ -f "$lab/hosts/$host.json" ]; then
    mkdir -p "$stage/etc/gpufleet-nvml-sim"
    cp "$lab/hosts/$host.json" "$stage/etc/gpufleet-nvml-sim/host.json"
  fi
  cp "$lab/ssh/id_ed25519.pub" "$stage/root/.ssh/authorized_keys"
  chmod 700 "$stage/root/.ssh"
  chmod 600 "$stage/root/.ssh/authorized_keys"
  chmod -R go-w,a+rX "$stage/opt" "$stage/etc" "$stage/usr"
  wait_booted "$name"
  # --no-overwrite-dir: /etc, /opt and /root keep their own owners and modes.
  (cd "$stage" && tar -c --owner=0 --group=0 -- etc opt root usr) | pm exec -i "$name" tar -x --no-overwrite-dir -C /
  pm exec -i "$name" bash -s "$config" <<'EOF' || die "$name: provisioning failed"
set -euo pipefail
# Test traffic stays on this machine: apt sees only the file: repositories under /srv/gpufleet-repos.
rm -f /etc/apt/sources.list /etc/apt/sources.list.d/debian.sources
echo 'deb [trusted=yes] file:/srv/gpufleet-debian ./' >/etc/apt/sources.list.d/gpufleet-lab-debian.list
apt-get update -qq
# node_exporter with its textfile collector (/var/lib/prometheus/node-exporter: the watchdog's and audit's metrics).
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-node-exporter >/dev/null
# The kernel log of the simulated driver (journalctl -k), ahead of the real journalctl; it runs as `python`.
ln -sfn /opt/gpufleet-nvml-sim/journalctl /usr/local/bin/journalctl
ln -sfn /usr/bin/python3 /usr/local/bin/python
# import pynvml finds the simulator for every python3 process (Ansible modules, systemd units), no PYTHONPATH.
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$site" /var/lib/gpufleet-nvml-sim
echo /opt/gpufleet-nvml-sim >"$site/gpufleet-nvml-sim.pth"
python3 -c 'import pynvml; assert pynvml.__file__.startswith("/opt/gpufleet-nvml-sim/"), pynvml.__file__'
# Each boot gets its own boot id and boots the simulated GPUs (gpufleet-lab-boot.service); this one too.
systemctl enable -q --now gpufleet-lab-boot.service
# The stand-in for the driver's view of which processes use which GPUs (idle on the CPU-only host).
systemctl enable -q --now gpufleet-lab-driver.service
# The image's host keys are the same in every container: each host gets its own.
rm -f /etc/ssh/ssh_host_*
ssh-keygen -A >/dev/null
systemctl enable -q ssh
systemctl restart ssh
mkdir -p /etc/gpufleet-lab
echo "$1" >/etc/gpufleet-lab/provisioned
EOF
  rm -rf "$stage"
}

wait_ssh() { # wait_ssh HOST ADDRESS: until it answers, at most 60 s
  local deadline=$((SECONDS + 60))
  until ssh_answers "$2"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "lab.sh: $1 ($2) does not answer ssh after 60 s; see: podman exec $(container "$1") journalctl -u ssh" >&2
      return 1
    fi
    sleep 1
  done
}

up() {
  local started=$SECONDS host address source name gpus config state line unanswered=0 unprovisioned=0
  local -a fresh=() known=() stale=() facts=() waits=() pairs=() provisions=()
  local -A gpu_counts=()
  check_table
  install_missing openssh-client dpkg-dev gnupg
  "$testbed/venv.sh" site
  "$testbed/prometheus_repo.sh" "$debian_repo"
  mkdir -p "$lab/ssh" "$lab/hosts"

  # One client key for the whole lab, kept until down.
  [ -f "$lab/ssh/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C gpufleet-lab -f "$lab/ssh/id_ed25519"
  # The signed stand-in apt repositories, built once (a new build has a new key: the hosts are made again).
  if [ ! -f "$lab/aptrepos/repo.json" ]; then
    python3 "$repo/tests/apt_repo/build.py" "$lab/aptrepos.tmp"
    rm -rf "$lab/aptrepos"
    mv "$lab/aptrepos.tmp" "$lab/aptrepos"
  fi
  # Each GPU host's description: its GPUs, this machine's CPUs and nodes (rewritten only when it changes).
  mapfile -t pairs < <(hosts | awk -v d="$repo/tests/nvml_sim/hosts" '{print $1 "=" d "/" $6 ".json"}')
  while read -r host gpus; do
    gpu_counts[$host]=$gpus
  done < <(python3 "$here/describe_host.py" --write "$lab/hosts" "${pairs[@]}")

  lock
  "$testbed/podman.sh" 9>&-
  "$testbed/image.sh" 9>&-
  image_id=$(pm image inspect --format '{{.Id}}' "$image")
  network_up
  # A container of the lab whose host left the table.
  mapfile -t stale < <(pm ps -a --filter "label=$label" --format '{{.Names}}' | grep -vxF -f <(hosts | awk '{print "gpufleet-lab-" $1}') || true)
  if [ "${#stale[@]}" -gt 0 ]; then
    remove_containers "${stale[@]}"
    say "removed ${stale[*]} (no longer in the lab)"
  fi
  # Start every missing or outdated container first, so that they boot side by side, then provision each.
  while read -r host address _ _ _ source; do
    name=$(container "$host")
    config=$(config_of "$host" "$address" "$source")
    state=$(pm container inspect "$name" --format '{{.State.Status}} {{index .Config.Labels "gpufleet-lab.config"}}' 2>/dev/null || true)
    if [ "${state#* }" = "$config" ]; then
      [ "${state%% *}" = running ] || { say "starting $name"; pm start "$name" >/dev/null; }
      # A host that is up to date has its mark, and its host key for known_hosts.
      mapfile -t facts < <(pm exec "$name" cat /etc/gpufleet-lab/provisioned /etc/ssh/ssh_host_ed25519_key.pub 2>/dev/null || true)
      if [ "${facts[0]:-}" = "$config" ] && [ -n "${facts[1]:-}" ]; then
        known+=("$address $(cut -d' ' -f1,2 <<<"${facts[1]}")")
        continue
      fi
      say "$name was not fully provisioned: making it again"
    elif [ -n "$state" ]; then
      say "$name is out of date: making it again"
    fi
    create "$host" "$address" "${gpu_counts[$host]}" "$config"
    fresh+=("$host $address $config")
  done < <(hosts)
  # Side by side: each host's provisioning waits on its own boot and apt, not on the others'.
  for line in "${fresh[@]}"; do
    read -r host address config <<<"$line"
    say "provisioning $(container "$host")"
    provision "$host" "$config" &
    provisions+=($!)
  done
  for line in "${provisions[@]}"; do
    wait "$line" || unprovisioned=1
  done
  [ "$unprovisioned" -eq 0 ] || die "not every host could be provisioned (above); the lab is left as it is, to look at"
  for line in "${fresh[@]}"; do
    read -r host address config <<<"$line"
    known+=("$address $(pm exec "$(container "$host")" cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f1,2)")
  done
  unlock
  rm -rf "$lab/stage"

  # known_hosts holds each host's own key, read through podman (not over the network): ssh checks it strictly.
  printf '%s\n' "${known[@]}" | sort >"$lab/ssh/known_hosts.tmp"
  mv "$lab/ssh/known_hosts.tmp" "$lab/ssh/known_hosts"

  hosts >"$lab/hosts.table"
  "$repo/.venv/bin/python" "$here/write_inventory.py" "$repo" "$lab" "$subnet" "$lab/hosts.table"

  # Every host must answer ssh; all are asked at once.
  while read -r host address _; do
    wait_ssh "$host" "$address" &
    waits+=($!)
  done < <(hosts)
  for line in "${waits[@]}"; do
    wait "$line" || unanswered=1
  done
  [ "$unanswered" -eq 0 ] || die "not every host answers ssh (above); the lab is left as it is, to look at"
  say "up: $(hosts | wc -l) hosts answer ssh ($((SECONDS - started)) s)"
  echo "$lab/inventory"
}

down() {
  local -a names
  lock
  mapfile -t names < <(pm ps -a --filter "label=$label" --format '{{.Names}}')
  if [ "${#names[@]}" -gt 0 ]; then
    remove_containers "${names[@]}"
    say "removed ${names[*]}"
  fi
  if pm network exists "$network"; then
    pm network rm "$network" >/dev/null
    say "removed podman network $network"
  fi
  unlock
  rm -rf "$lab" "$repo/examples/hk-fleet/reports"
  say "removed $lab and the lab's fleet reports"
}

status() {
  local host address name state answers
  printf '%-12s %-12s %-10s %s\n' HOST ADDRESS CONTAINER SSH
  while read -r host address _; do
    name=$(container "$host")
    state=$(pm container inspect "$name" --format '{{.State.Status}}' 2>/dev/null || echo absent)
    answers=no
    if [ "$state" = running ] && [ -f "$lab/ssh/known_hosts" ] && ssh_answers "$address"; then answers=yes; fi
    printf '%-12s %-12s %-10s %s\n' "$host" "$address" "$state" "$answers"
  done < <(hosts)
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
