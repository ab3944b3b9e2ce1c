#!/usr/bin/env bash
# Start a real single-node Slurm on 127.0.0.1 under one state folder (default /tmp/fdeval-slurm):
# munge -> private MariaDB -> slurmdbd -> slurmctld -> slurmd, with 8 fake GPUs as GRES.
# Prints the SLURM_CONF to export. Stop it with slurm/stop.sh (by PID files, never by name).
set -euo pipefail
D=${FDEVAL_SLURM_DIR:-/tmp/fdeval-slurm}
HOST=$(hostname -s)
NCPU=$(nproc)
MEM=$(( $(free -m | awk '/Mem/{print $2}') - 1024 ))
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$D/etc/slurm.conf" ] && SLURM_CONF="$D/etc/slurm.conf" sinfo -h -N -o %T 2>/dev/null | grep -qE 'idle|mix|alloc'; then
  echo "SLURM_CONF=$D/etc/slurm.conf"
  exit 0
fi
bash "$here/stop.sh" >/dev/null 2>&1 || true
rm -rf "$D"
mkdir -p "$D"/{etc,state,spool,log,run,dev,db,mysqlrun}
for i in 0 1 2 3 4 5 6 7; do ln -s /dev/null "$D/dev/nvidia$i"; done

cat > "$D/etc/slurm.conf" <<CONF
ClusterName=localci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
SchedulerType=sched/backfill
# sched_interval=2: a requeued job starts soon after its hold ends (the default main loop runs
# every 60 s). cred_expire=15: the hold Slurm puts on a requeued job is cred_expire + 1 s (default
# 121 s); 15 s still leaves a local step launch ample time to use its credential.
SchedulerParameters=batch_sched_delay=0,sched_interval=2
AuthInfo=cred_expire=15
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$NCPU RealMemory=$MEM Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
cat > "$D/etc/gres.conf" <<CONF
AutoDetect=off
NodeName=$HOST Name=gpu File=$D/dev/nvidia[0-7]
CONF
cat > "$D/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=slurm
StoragePass=fdeval-local
StorageLoc=slurm_acct_db
LogFile=$D/log/slurmdbd.log
PidFile=$D/run/slurmdbd.pid
CONF
chmod 600 "$D/etc/slurmdbd.conf"
export SLURM_CONF=$D/etc/slurm.conf

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local t=$1 what=$2; shift 2
  for _ in $(seq $((t * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "slurm: timed out waiting for $what (logs in $D/log)" >&2; return 1
}

# munge (its own key if none exists)
mkdir -p /run/munge /etc/munge /var/log/munge /var/lib/munge
[ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
chown -R munge:munge /run/munge /etc/munge /var/log/munge /var/lib/munge
chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
if ! munge -n >/dev/null 2>&1; then  # start munged only if none runs; then it is ours to stop
  su -s /bin/sh munge -c "munged --pid-file=/run/munge/munged.pid"
  wait_for 10 munge munge -n
  cp /run/munge/munged.pid "$D/run/munged.pid"
fi

# private MariaDB for accounting (submitit polls sacct)
chown mysql:mysql "$D/db" "$D/mysqlrun"
mariadb-install-db --user=mysql --datadir="$D/db" --auth-root-authentication-method=normal >"$D/log/mariadb-install.log" 2>&1
mariadbd --no-defaults --user=mysql --datadir="$D/db" --socket="$D/mysqlrun/mysqld.sock" \
  --pid-file="$D/mysqlrun/mariadb.pid" --bind-address=127.0.0.1 --port=3306 --skip-name-resolve \
  >"$D/log/mariadb.log" 2>&1 &
wait_for 30 mariadb mariadb --no-defaults --socket="$D/mysqlrun/mysqld.sock" -uroot -e "select 1"
mariadb --no-defaults --socket="$D/mysqlrun/mysqld.sock" -uroot -e "
  CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'fdeval-local';
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'fdeval-local';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
  FLUSH PRIVILEGES;"
cp "$D/mysqlrun/mariadb.pid" "$D/run/mariadb.pid"

slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
wait_for 30 slurmdbd sacctmgr -n list cluster
sacctmgr -i add cluster localci >/dev/null 2>&1 || true
slurmctld -f "$SLURM_CONF"
wait_for 30 slurmctld scontrol ping
slurmd -f "$SLURM_CONF"
wait_for 30 "an idle node" bash -c "sinfo -h -N -o %T | grep -qE 'idle|mix'"
echo "SLURM_CONF=$SLURM_CONF"
