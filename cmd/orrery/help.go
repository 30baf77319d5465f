package main

// usageText is what orrery help prints: every command, one line each.
const usageText = `orrery operates an Orrery cluster.

Usage: orrery [global flags] <command> [arguments and flags]

Commands:
  schedules list --namespace NS [--queue Q] [--state S] [--max N] [--after TOKEN]
  schedules describe NS QUEUE KEY ID|NAME [--generations]
  schedules create NAME --namespace NS --queue Q [--key K] (--cron EXPR [--tz ZONE] | --every DUR [--start TIME] | --at TIME | --after DUR) [--payload JSON] ...
  schedules update NAME --namespace NS --queue Q [--key K] [only the flags to change]
  schedules pause|resume|trigger|delete NS QUEUE KEY ID|NAME
  schedules skip-expired NS QUEUE KEY ID|NAME   pass the expired occurrences a schedule stopped at
  schedules backfill --from TIME [--to TIME] NS QUEUE KEY ID|NAME   run a past range's instants now
  schedules process-due --namespace NS (--partition N | --queue Q --key K) [--max N]   emit due schedules now
  schedules export --namespace NS [--queue Q] [--state S] > schedules.jsonl
  schedules import < schedules.jsonl
  sagas list --namespace NS [--queue Q] [--phase P] [--label K=V]... [--max N] [--after TOKEN]
  sagas describe NS QUEUE KEY ID|NAME
  queues stats NS QUEUE [KEY]
  queues peek NS QUEUE KEY [-n N] [--after ID]
  queues redrive-dlq NS QUEUE KEY [--max N]
  queues pause NS QUEUE [--reason R]   stop every partition's receives of a queue (enqueues still land)
  queues resume NS QUEUE
  messages enqueue NS QUEUE KEY [--id ID] [--payload JSON] [--headers JSON] [--ordering-key K] [--delay D] [--ttl D] [--max-deliveries N]
      [--priority 0..9] [--unique-key K | --unique-by-payload] [--unique-for D]   send a message; a duplicate of a unique key's holder is skipped
      [--retry-max-attempts N] [--retry-initial-backoff D] [--retry-max-backoff D] [--retry-jitter P] [--retry-on-exhausted dead-letter|drop]
  queues retry-policy NS QUEUE [--max-attempts N] [--initial-backoff D] [--max-backoff D] [--jitter P] [--on-exhausted dead-letter|drop] | --remove
      how every partition retries the queue's failed messages (backoff, then dead-letter or drop)
  queues limit NS QUEUE --max-leased K --per-second R | --remove
                                      cap a queue cluster-wide: at most K leased at once, R leases/s
  messages cancel NS QUEUE KEY ID [--reason R]   remove a message, or revoke its lease if leased
  calendars put NS NAME [--tz ZONE] [--date D]... [--range FROM..TO]... [--cron EXPR]... [--description TEXT]
      an exclusion calendar on every partition; a schedule's --calendar NAME skips (ledgers excluded) what it excludes
  calendars delete|get NS NAME
  calendars list NS [--max N] [--after NAME]
  lag [--namespace NS --queue Q] [--fail-over DUR]
  audit [--since 24h] [--max N] [--after TOKEN]
  partitions [--admin URL]
  partitions check [--admin URL]
  silos [--admin URL]
  help

A schedule's or saga's NAME may stand where its ID goes. A schedule's name addresses the schedule
of that name (a deleted schedule's id stays terminal, and the next schedule of its name gets a
new id, so a deleted schedule is addressed by its id); a saga's id is derived from the namespace
and the name. "orrery <command> --help" lists a command's flags; "orrery --help" the global
flags. Every flag can also be set as ORRERY_<FLAG> in the environment.
`

// scheduleSubcommands are the schedules subcommands, for usage errors.
const scheduleSubcommands = "list, describe, create, update, pause, resume, trigger, delete, skip-expired, backfill, process-due, export or import"

// schedulesHelp is what orrery schedules help prints.
const schedulesHelp = `orrery schedules: list, describe, create, update, pause, resume, trigger, delete, skip-expired, backfill, process-due, export, import.

  schedules list --namespace NS [--queue Q] [--state active|paused|suspended|cancelled|completed] [--label K=V]... [--name-prefix P] [--max N] [--after TOKEN]
  schedules describe NS QUEUE KEY ID|NAME
  schedules create NAME --namespace NS --queue Q [--key K] (--cron EXPR [--tz ZONE] | --every DUR [--start TIME] | --at TIME | --after DUR)
      [--payload JSON] [--headers JSON] [--misfire catch_up|skip|coalesce] [--overlap allow_all|skip|buffer_one]
      [--catch-up DUR] [--ttl DUR] [--max-deliveries N] [--priority 0..9] [--expired fail|skip] [--jitter DUR [--jitter-early]] [--label K=V]... [--pace N/DUR]
      [--calendar NAME]... [--retry-max-attempts N] [--retry-initial-backoff D] [--retry-max-backoff D] [--retry-jitter P] [--retry-on-exhausted dead-letter|drop]
  schedules update NAME --namespace NS --queue Q [--key K] [any flag of create: only those given change]
  schedules pause|resume|trigger|delete NS QUEUE KEY ID|NAME
  schedules process-due --namespace NS (--partition N [--queue Q] | --queue Q --key K) [--max N]
      emit now, oldest due first, at most N due schedules (default 100), as the due coordinator would;
      it never enqueues an occurrence twice
  schedules export --namespace NS [--queue Q] [--state S] > schedules.jsonl
  schedules import < schedules.jsonl

A schedule's key defaults to its name in create and update. "orrery schedules create --help"
lists the flags.
`
