"""A Flower App folder as a simfl scenario: what ``simfl flwr run APP_DIR`` runs.

The folder's ``pyproject.toml`` says what Flower's ``flwr run`` reads:

- ``[tool.flwr.app.components]``: ``serverapp`` and ``clientapp``, import paths inside the folder;
- ``[tool.flwr.app.config]``: the run config, flattened with dots as Flower flattens it, then
  ``--run-config "k=v ..."`` (or a ``.toml`` file) applied with Flower's own parser and rule (a key the app
  does not declare is dropped, as ``flwr run`` drops it);
- ``[tool.flwr.federations]``: the default federation's ``options`` (``num-supernodes``,
  ``backend.client-resources.num-cpus``, ``backend.init-args.num-cpus``), then ``--federation-config
  "num-supernodes=N ..."``.

The scenario (``--scenario FILE``, none needed) gives what Flower's simulation has no word for: latencies,
availability, failures, seeds, budget. To it this module adds ``client: {flower_app, run_config}``, the training
threads (``num-cpus``, Flower's default 2, so that numbers match Flower's engine; as many ClientApp calls side by side
in worker processes as Flower's engine would run, its CPUs over each ClientApp's: with ``backend.init-args.num-cpus``
from the start; without it, the machine's cores as Flower's default, once the calls have proved heavy enough to pay
for the workers' start, :func:`spare_pool`, which the launch applies, not the scenario) and, unless the scenario names its
own algorithms (an asynchronous rule over the same ClientApp, ``--set 'algorithms=[{name: orthofl}]'``), the
entry ``{name: serverapp}`` (:mod:`simfl.algorithms.serverapp`): the app's ServerApp as written. Without a
``latency:`` section the nodes are the measured Raspberry Pi devices (:data:`DEFAULT_LATENCY`, said in one line).
Without a ``model:`` section the model is the app's (``{name: flower_app}``: the app's ServerApp holds it, simfl
relays its messages; simfl's own algorithms take the arrays it sends first, :mod:`simfl.models.arrays`); without
``data:`` the data are the ClientApp's own (``{dataset: flower_app}``, :mod:`simfl.data.app`), ``num-supernodes``
clients (the default federation's, else Flower's default, 2). A ``data:`` section (simfl's partition, which
``simfl.train.flower.client_data`` hands an app that asks) takes ``num-supernodes`` as its client count.

Without a ``budget:`` section (a budget the scenario or ``--set`` gives always wins), a run of the ServerApp ends when
its ``main`` returns, so the budget is one no app reaches (100,000 periods of ``eval.every``, whose default is 60
virtual seconds). simfl's own rules over the app have no ``main`` to end them: their budget is the app's rounds (the
run config's ``num-server-rounds``, with ``--run-config`` applied by Flower's parser) as client updates,
:func:`own_budget`, and without that key they are refused in one line naming ``budget.updates``.

``--compare RULES`` (:func:`compared`) puts simfl's rules beside the app's ServerApp, in one folder: the entry
``serverapp`` first (the comparison's baseline, ``eval.baseline``), then one entry per rule over the same ClientApp,
nodes, data, latencies, seeds and evaluation grid. Without a budget of the user's each rule runs the app's rounds as
client updates (:func:`own_budget`, as alone), and the ServerApp all its rounds: its entry says ``budget_updates:
false``, so the update budget does not cut its last round (its evaluate or query messages count as updates too).
A rule that cannot run over the app is refused before anything runs, in one line naming it
(:func:`check_rules`, :func:`check_model`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tomllib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simfl import yamlsafe
from simfl.errors import InputError
from simfl.train.configs import cores
from simfl.yamlsafe import MAX_DEPTH

if TYPE_CHECKING:
    from simfl.schema.scenario import Scenario

DEFAULT_CPUS = 2
"""Flower's simulation gives each ClientApp 2 CPUs unless told otherwise (``flower_default`` reads Flower's own)."""
DEFAULT_NODES = 2
"""The supernodes of Flower's default simulation (``flower_default`` reads Flower's own)."""
DEFAULT_LATENCY = {"model": "rpi_gaussian"}
"""The latencies of an app run without a scenario that gives them: each node a Raspberry Pi measured in the paper's
testbed (one of its nine device profiles at random), each round a Gaussian draw of that device's round time."""
LATENCY_NOTE = ("no latency given: each node is one of the paper's measured Raspberry Pi devices, each round a draw "
                "of its round time (latency: {model: rpi_gaussian}); --scenario FILE with latency: sets others")
"""What ``simfl flwr run`` says when it uses :data:`DEFAULT_LATENCY`."""


def flower_default(name: str, fallback: int) -> int:
    """A value of Flower's default simulation (``num_supernodes``, ``client_resources_num_cpus``), as the installed
    Flower states it (1.42: ``flwr.supercore.constant.DEFAULT_SIMULATION_CONFIG``), else ``fallback``."""
    try:
        from flwr.supercore.constant import DEFAULT_SIMULATION_CONFIG
    except ImportError:  # pragma: no cover - a Flower that states none
        return fallback
    value = getattr(DEFAULT_SIMULATION_CONFIG, name, fallback)
    return int(value) if isinstance(value, int | float) and value >= 1 else fallback
OPEN_PERIODS = 100_000
"""The default budget, in evaluation periods: a ServerApp's run ends when its main returns, long before."""
ROUNDS_KEY = "num-server-rounds"
"""The run-config key of an app's rounds (Flower's app templates'; what ``ServerAppConfig.max_rounds`` reads)."""
DEFAULT_EVAL = 60.0
"""Virtual seconds between simfl's evaluations of the model the app sent last, unless the scenario says."""
BASELINE = "serverapp"
"""The entry of the app's own ServerApp: the baseline of ``--compare``."""


@dataclass(frozen=True)
class FlowerApp:
    """What a Flower App's ``pyproject.toml`` says."""

    folder: Path
    name: str
    serverapp: str
    clientapp: str
    config: dict[str, Any]
    """``[tool.flwr.app.config]``, flattened."""
    federation: dict[str, Any]
    """The default federation's options, flattened (``num-supernodes``, ``backend.client-resources.num-cpus``)."""

    def components(self) -> tuple[str, str]:
        """The import paths of the app's own code (``simfl flwr run`` imports them without ``--allow-imports``)."""
        return (self.serverapp, self.clientapp)


def _kind(value: Any) -> str:
    """A TOML value's kind and a short repr, for messages."""
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "text", list: "an array", dict: "a table"}
    text = repr(value)
    return f"{kinds.get(type(value), type(value).__name__)} {text if len(text) <= 40 else text[:37] + '...'}"


def _table(parent: Mapping[str, Any], key: str, where: str, needed: bool = False) -> Mapping[str, Any]:
    """``parent[key]``, a table (empty when absent, unless ``needed``); else one line naming ``where``."""
    value = parent.get(key)
    if value is None and not needed:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(where, f"must be a table (a [{where.rsplit(': ', 1)[-1]}] section), got "
                         f"{'nothing' if value is None else _kind(value)}")
    return value


def _flat(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``table`` flattened with dots by Flower's own rule (``flatten_dict``: values are booleans, numbers or text, or
    tables of those); a value of another kind is one line naming its key."""
    from flwr.common.config import flatten_dict

    try:
        return dict(flatten_dict(dict(table)))
    except ValueError:
        pass
    stack = [(where, table)]
    while stack:  # the key Flower's message names without its path
        prefix, item = stack.pop()
        for key, value in item.items():
            if isinstance(value, Mapping):
                stack.append((f"{prefix}.{key}", value))
            elif not isinstance(value, bool | int | float | str):
                raise InputError(f"{prefix}.{key}", f"must be a boolean, a number or text (a Flower config value), "
                                 f"got {_kind(value)}")
    raise InputError(where, "holds a value that is not a boolean, a number or text")  # pragma: no cover - found above


def read_app(folder: Path) -> FlowerApp:
    """The app in ``folder``, from its ``pyproject.toml``: one line naming the file and the key for a file that is not
    TOML, nested too deeply, or with a value of the wrong kind where ``flwr run`` reads one."""
    project = folder / "pyproject.toml"
    if not project.is_file():
        raise InputError(str(folder), "is not a Flower App folder: it has no pyproject.toml")
    try:
        raw = tomllib.loads(project.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(str(project), f"is not valid TOML ({exc})") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables recursively
        raise InputError(str(project), f"is nested too deeply (arrays or inline tables more than {MAX_DEPTH} levels "
                         "inside each other)") from None
    except OSError as exc:
        raise InputError(str(project), f"cannot be read ({exc.strerror or exc})") from None
    yamlsafe.check_value(raw, str(project))  # at most MAX_DEPTH levels and MAX_NODES values, as a scenario
    at = f"{project}: "
    flwr = _table(_table(raw, "tool", at + "tool"), "flwr", at + "tool.flwr")
    app = _table(flwr, "app", at + "tool.flwr.app")
    components = _table(app, "components", at + "tool.flwr.app.components")
    found = {}
    for key in ("serverapp", "clientapp"):
        value = components.get(key)
        if not isinstance(value, str) or ":" not in value:
            raise InputError(f"{at}tool.flwr.app.components.{key}",
                             f"must be an import path package.module:attribute, got {value!r}")
        found[key] = value
    config = _flat(_table(app, "config", at + "tool.flwr.app.config"), at + "tool.flwr.app.config")
    federations = _table(flwr, "federations", at + "tool.flwr.federations")
    default = federations.get("default")
    options: dict[str, Any] = {}
    if default is not None:
        if not isinstance(default, str):
            raise InputError(f"{at}tool.flwr.federations.default", f"must be the name of a federation, got {_kind(default)}")
        where = f"{at}tool.flwr.federations.{default}"
        if default not in federations:
            raise InputError(f"{at}tool.flwr.federations.default", f"names the federation {default!r}, which has no "
                             f"[tool.flwr.federations.{default}] table")
        options = _flat(_table(_table(federations, default, where, needed=True), "options", where + ".options"),
                        where + ".options")
    described = _table(raw, "project", at + "project")
    name = described.get("name", folder.resolve().name)
    if not isinstance(name, str) or not name:
        raise InputError(f"{at}project.name", f"must be the app's name (text), got {_kind(name)}")
    return FlowerApp(folder, name, found["serverapp"], found["clientapp"], config, options)


def parse_pairs(texts: list[str], where: str) -> dict[str, Any]:
    """``k=v`` pairs (TOML values, space-separated) or one ``.toml`` file, read by Flower's own parser, flattened."""
    if not texts:
        return {}
    from flwr.common.config import parse_config_args

    try:
        return dict(parse_config_args(texts))
    except Exception as exc:  # Flower raises click's exception, ValueError or OSError for a bad text or file
        text = " ".join(str(getattr(exc, "message", exc)).split())
        raise InputError(where, f"{text} (e.g. \"lr=0.1 local-epochs=2 name='x'\")") from None


def fused(app: FlowerApp, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run config: the app's, with ``overrides`` of the keys it declares (Flower's rule)."""
    return {key: overrides.get(key, value) for key, value in app.config.items()}


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(where, f"must be a whole number of at least 1, got {value!r}")
    return value


def app_scenario(app: FlowerApp, base: Mapping[str, Any], run_config: Mapping[str, Any],
                 federation: Mapping[str, Any], compare: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The scenario of ``app``: ``base`` (the ``--scenario`` file's contents) completed as the module says; with
    ``compare`` (the entries of :func:`compared`), the ServerApp's entry and then those."""
    raw = dict(base)
    options = {**app.federation, **federation}
    config = fused(app, run_config)
    raw.setdefault("name", app.name)
    if "client" in raw:
        raise InputError("--scenario: client", "is the app's ClientApp under simfl flwr run; leave client out")
    raw["client"] = {"flower_app": app.clientapp, "run_config": config, "app_hash": app_hash(app.folder)}
    server: dict[str, Any] = {"name": BASELINE, "app": app.serverapp, "run_config": config}
    if compare is None:
        raw.setdefault("algorithms", [server])
    else:
        if "algorithms" in raw:
            raise InputError("--compare", "names the entries itself (the app's ServerApp, then the rules): leave "
                             "algorithms out of --scenario and --set")
        if "budget" not in raw:  # the rules run to the app's rounds as updates, the ServerApp to its main's end
            server["budget_updates"] = False
        raw["algorithms"] = [server, *compare]
        given = raw.get("eval", {"every": DEFAULT_EVAL})
        if isinstance(given, Mapping):  # else validation names it
            raw["eval"] = {"baseline": BASELINE, **given}
    raw.setdefault("eval", {"every": DEFAULT_EVAL})
    every = raw["eval"].get("every", DEFAULT_EVAL) if isinstance(raw["eval"], Mapping) else DEFAULT_EVAL
    nodes = _whole(options["num-supernodes"], "--federation-config: num-supernodes") if "num-supernodes" in options \
        else None
    raw.setdefault("latency", dict(DEFAULT_LATENCY))
    if "data" not in raw:
        count = nodes if nodes is not None else flower_default("num_supernodes", DEFAULT_NODES)
        raw["data"] = {"dataset": "flower_app", "partition": {"kind": "iid", "clients": count}}
    elif nodes is not None:
        data = dict(raw["data"])
        partition = dict(data.get("partition", {}))
        if partition.get("clients", nodes) != nodes:
            raise InputError("--federation-config: num-supernodes", f"is {nodes}, but the scenario's "
                             f"data.partition.clients is {partition['clients']}; give one number of clients")
        partition["clients"] = nodes
        data["partition"] = partition
        raw["data"] = data
    if "budget" not in raw and isinstance(every, int | float) and not isinstance(every, bool) and every > 0:
        open_ended = {"time": float(every) * OPEN_PERIODS}
        budget = own_budget(raw["algorithms"], config, _clients(raw["data"]))
        raw["budget"] = open_ended if budget is None else {**budget, **open_ended}
    raw.setdefault("model", {"name": "flower_app", "app": app.serverapp, "run_config": config})
    cpus = options.get("backend.client-resources.num-cpus", flower_default("client_resources_num_cpus", DEFAULT_CPUS))
    executor = dict(raw.get("executor", {}))
    threads = executor.setdefault("threads", _whole(cpus, "--federation-config: backend.client-resources.num-cpus"))
    if "backend.init-args.num-cpus" in options and "kind" not in executor and isinstance(threads, int):
        # Flower's engine runs (its CPUs // each ClientApp's CPUs) ClientApps side by side: so does simfl, in processes
        side = _whole(options["backend.init-args.num-cpus"], "--federation-config: backend.init-args.num-cpus") \
            // max(threads, 1)
        if side >= 2:
            executor.update({"kind": "process", "workers": side})
    raw["executor"] = executor
    return raw


def leaves_executor(raw: Mapping[str, Any]) -> bool:
    """Whether the app's scenario ``raw`` leaves the executor to the launch (names no ``executor.kind``): its runs
    then get :func:`spare_pool`'s workers, which the launch keeps for a resume (:attr:`~simfl.launch.checkpoint.Session.
    spare`)."""
    executor = raw.get("executor")
    return isinstance(executor, Mapping) and "kind" not in executor


def spare_pool(threads: int, side_by_side: int) -> int:
    """The workers of the process pool each run of an app whose scenario leaves the executor to the launch
    (:func:`leaves_executor`) may start once its ClientApp calls prove heavy (the ``adaptive`` executor,
    :mod:`simfl.train.adaptive`): Flower's engine, given no CPUs of its backend, runs the machine's cores over each
    ClientApp's side by side, so simfl gives each run the cores the ``side_by_side`` runs leave it, over its
    ``threads``; 0 where no two calls fit."""
    pool = cores() // max(threads, 1) // max(side_by_side, 1)
    return pool if pool >= 2 else 0


def _clients(data: Any) -> int | None:
    """The client count a scenario's ``data:`` section gives (its partition's ``clients``); None: it gives none."""
    partition = data.get("partition") if isinstance(data, Mapping) else None
    clients = partition.get("clients") if isinstance(partition, Mapping) else None
    return clients if isinstance(clients, int) and not isinstance(clients, bool) and clients >= 1 else None


def _round_size(entry: Any, clients: int) -> int | None:
    """The clients whose updates a round of the synchronous rule ``entry`` (a raw ``algorithms`` item) waits for on
    ``clients`` clients (its config's ``round_clients``: ``clients_per_round``, a Flower strategy's sample size);
    None for an asynchronous rule, and for an entry its validation refuses (which the scenario's then says)."""
    config = _entry_config(entry)
    if config is None or not getattr(config, "synchronous", False):
        return None
    try:
        size = config.round_clients(clients)  # type: ignore[attr-defined]
    except Exception:  # an entry that is not valid: the scenario's validation names it, in one line
        return None
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 1 else None


def _entry_config(entry: Any) -> Any:
    """The validated config of ``entry`` (a raw ``algorithms`` item), or None where it cannot be read now (not a
    mapping with a name, an import path not allowed, a plugin that does not import, a value its config refuses):
    the scenario's validation then names it, in one line, before any budget is asked for."""
    from simfl.schema import plugins

    name = entry.get("name") if isinstance(entry, Mapping) else None
    if not isinstance(name, str):
        return None
    try:
        builtin = plugins.KINDS["algorithm"].configs()
        config_class = builtin[name] if name in builtin else plugins.plugin_config("algorithm", name)
        return config_class.model_validate(dict(entry))
    except Exception:  # refused or broken: validation says which
        return None


def own_budget(algorithms: Any, run_config: Mapping[str, Any], clients: int | None) -> dict[str, int] | None:
    """The budget of simfl's own rules over an app that the user gave none: ``{updates: R * K}``, with R the app's
    rounds (its run config's ``num-server-rounds``) and K the clients of a round: the largest round of the
    synchronous rules among ``algorithms`` (so each runs R rounds when its rounds deliver all their updates, a
    smaller one more), else, with asynchronous rules only, every one of the ``clients`` (a round of every node, as
    Flower's FedAvg samples by default): as many client updates as R rounds of K clients. None when every entry is
    the app's ServerApp (``main`` ends its run). One line naming ``budget`` when no R can be read, and when the
    ServerApp runs beside simfl's own rules (its every message counts as an update, so one budget cannot be both)
    unless its entry says ``budget_updates: false`` (``--compare``: the update budget then stops the rules only)."""
    entries = list(algorithms) if isinstance(algorithms, list) else []
    servers = [e for e in entries if isinstance(e, Mapping) and e.get("name") == BASELINE]
    own = [e for e in entries if not (isinstance(e, Mapping) and e.get("name") == BASELINE)]
    if not own:
        return None
    how = ("set one, e.g. --set budget.updates=N (client updates; a synchronous round of K clients makes K) or "
           "--set budget.time=SECONDS (virtual seconds)")
    if any(e.get("budget_updates", True) is not False for e in servers):
        raise InputError("budget", "is needed when simfl's own rules run beside the app's ServerApp: the ServerApp's "
                         "run ends when its main returns, theirs at the budget, and every message the ServerApp sends "
                         f"counts as an update, so no budget is taken from the app's rounds; {how}")
    if any(_entry_config(e) is None for e in own):  # the scenario's validation names the entry
        return None
    rounds = run_config.get(ROUNDS_KEY)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        found = "has none" if rounds is None else f"gives {_kind(rounds)}, not a whole number of at least 1"
        raise InputError("budget", f"is needed by simfl's own rules over the app, which would otherwise run without "
                         f"end: it is taken from the app's rounds, its run config's {ROUNDS_KEY} (pyproject.toml's "
                         f"[tool.flwr.app.config] or --run-config), which {found}; {how}")
    sizes = [k for k in (_round_size(e, clients) for e in own) if k is not None] if clients is not None else []
    per_round = max(sizes, default=clients)
    if per_round is None:
        raise InputError("budget", f"is needed by simfl's own rules over the app: its {ROUNDS_KEY} ({rounds}) gives "
                         f"rounds, but the scenario's data.partition gives no client count to make them updates; {how}")
    return {"updates": rounds * per_round}


def importable(folder: Path) -> None:
    """Let this process and the worker processes it starts import the app's modules (the folder first)."""
    path = str(folder.resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    current = os.environ.get("PYTHONPATH", "")
    if path not in current.split(os.pathsep):
        os.environ["PYTHONPATH"] = path + (os.pathsep + current if current else "")


def app_hash(folder: Path) -> str:
    """The SHA-256 of the app in ``folder`` as Flower would bundle it: the files ``flwr build`` takes (its
    ``.gitignore``, include and exclude rules, :mod:`flwr.cli.build`), by path and content, and ``pyproject.toml``
    without its federations (which Flower leaves out of a bundle too). Result folders simfl writes inside the
    app's folder (those with its marker, and staging folders) are not the app's. Where Flower's rules refuse the
    folder (a path too deep, a pattern matching nothing), its Python files."""
    from flwr.cli.build import collect_files, filter_paths_for_publish, get_filtered_fab_paths

    from simfl import outdir

    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    project.get("tool", {}).get("flwr", {}).pop("federations", None)  # read_app checked that both are tables
    simfls: dict[str, bool] = {}

    def simfls_own(rel: str) -> bool:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            key = "/".join(parts[:i])
            if key not in simfls:
                here = folder / key
                simfls[key] = here.name.endswith(".partial") or outdir.is_ours(here)
            if simfls[key]:
                return True
        return False

    files = {rel: path for rel, path in collect_files(folder).items() if not simfls_own(rel)}
    try:
        with warnings.catch_warnings():  # Flower's use of pathspec's old pattern name is Flower's business
            warnings.simplefilter("ignore", DeprecationWarning)
            chosen = sorted(get_filtered_fab_paths(filter_paths_for_publish(files), project))
    except Exception:  # Flower's rules refuse the folder (a path too deep, a pattern matching nothing): its code
        chosen = sorted(rel for rel in files if rel.endswith(".py"))
    digest = hashlib.sha256(json.dumps(project, sort_keys=True, default=str).encode())
    for rel in chosen:
        digest.update(f"\n{rel},{hashlib.sha256(files[rel].read_bytes()).hexdigest()}".encode())
    return digest.hexdigest()


def check_resumed(app: FlowerApp, out: Path) -> None:
    """Refuse to continue ``out`` with another app than the one it ran (its scenario.yaml's client.flower_app), or with
    the app's files changed since its runs began (client.app_hash)."""
    from simfl.output.results import OutputFolder
    from simfl.schema import scenario as scenario_mod

    folder = OutputFolder(out, reopen=True)  # one line when there is nothing to resume
    ran = scenario_mod.read_yaml(folder.stage / "scenario.yaml").get("client")
    clientapp = ran.get("flower_app") if isinstance(ran, Mapping) else None
    if clientapp != app.clientapp:
        raise InputError("--resume", f"{out} ran the ClientApp {clientapp!r}, not {app.clientapp!r} of {app.folder}; "
                         "give the folder of the app it ran")
    before = ran.get("app_hash") if isinstance(ran, Mapping) else None
    if before is not None and before != app_hash(app.folder):
        raise InputError("--resume", f"the app in {app.folder} changed since {out}'s runs began (the files Flower "
                         "would bundle differ: its code, pyproject.toml or other files): continuing would mix two "
                         "versions of the app in one folder; give the app as it was, or run it anew into another --out")


def rule_names() -> list[str]:
    """The names ``--compare`` takes: simfl's built-in rules (the ServerApp's entry aside: it is the baseline) and the
    installed plugins' (an import path ``package.module:Class`` too, with ``--allow-imports``)."""
    from simfl.algorithms.configs import BUILTINS
    from simfl.schema import plugins

    return [name for name in BUILTINS if name != BASELINE] + plugins.installed_names("algorithms")


def compared(text: str) -> list[dict[str, Any]]:
    """The entries ``--compare RULES`` names: comma-separated rule names (``fedbuff,orthofl``, each with its
    defaults), or a YAML list as ``--set algorithms=...`` takes, of names and entries with options
    (``'[fedbuff, {name: fedavg, clients_per_round: 6}]'``). One line naming ``--compare`` for an unknown name (the
    allowed ones listed), the ServerApp's own entry, a name twice, or none."""
    from simfl.schema.scenario import apply_override

    where = "--compare"
    if text.strip().startswith("["):
        holder: dict[str, Any] = {}
        apply_override(holder, f"rules={text}")
        items = holder["rules"] if isinstance(holder.get("rules"), list) else []
    else:
        items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise InputError(where, f"names no rule, got {text!r}; e.g. --compare fedbuff,orthofl")
    known = rule_names()
    entries: list[dict[str, Any]] = []
    for item in items:
        entry: dict[str, Any] = {"name": item} if isinstance(item, str) else \
            {str(k): v for k, v in item.items()} if isinstance(item, Mapping) else {}
        name = entry.get("name")
        if not isinstance(name, str):
            raise InputError(where, f"each rule is a name or an entry {{name: ..., option: value}}, got {item!r}")
        if name == BASELINE:
            raise InputError(where, f"{BASELINE} is the app's own ServerApp, which --compare runs as the baseline; "
                             "name simfl's rules only")
        if name not in known and ":" not in name:
            raise InputError(where, f"no rule named {name!r}; simfl's rules: {', '.join(known)} (or an import path "
                             "package.module:Class, with --allow-imports)")
        entries.append(entry)
    labels = [_rule(e) for e in entries]
    twice = sorted({label for label in labels if labels.count(label) > 1 or label == BASELINE})
    if twice:
        raise InputError(where, f"names {twice[0]} twice (or as the baseline's name); give each entry its own label, "
                         f"e.g. '[{twice[0]}, {{name: {twice[0]}, label: {twice[0]}_2}}]'")
    return entries


def _rule(entry: Mapping[str, Any]) -> str:
    """How a line names a ``--compare`` entry (a raw one): as its runs are named, its label, else its name (for an
    import path, the class's name: :func:`simfl.algorithms.configs.run_name`)."""
    from simfl.names import short_name

    return str(entry.get("label") or short_name(str(entry.get("name"))))


def _about_entry(exc: InputError, where: str, entry: Mapping[str, Any]) -> str:
    """What a refusal of the scenario ``where`` with one entry says, without the entry's path ``algorithms[0]`` (the
    line names the rule before it); for a bare name refused for one of its options, where the options go."""
    text = (exc.message if exc.where == where else str(exc)).removeprefix("(top level): ")  # a model validator's
    prefix = "algorithms[0]"
    if not text.startswith(prefix):
        return text
    hint = "" if set(entry) != {"name"} or not text.startswith(prefix + ".") else (
        f"; options go in the YAML form, --compare '[{{name: {entry['name']}, option: value}}]'")
    return text[len(prefix):].lstrip(".:").strip() + hint


def check_rules(raw: Mapping[str, Any], validate: Callable[[dict[str, Any]], Scenario], where: str) -> None:
    """Refuse, in one line naming the rule and why, a ``--compare`` rule (``raw``'s entries after the ServerApp's)
    that cannot run over the app: ``validate`` (the command's: validation, paths, the checks that need the clients)
    of the scenario with that rule alone refuses it (an option out of range, a hook a ClientApp cannot take, PORT's
    recall); ``where`` is what its lines name the scenario by. The scenario with the ServerApp alone is validated
    first, so that a mistake of the scenario's own is said as it is, not blamed on a rule."""
    entries = list(raw["algorithms"])
    validate({**raw, "algorithms": entries[:1]})
    alone = {key: value for key, value in raw["eval"].items() if key != "baseline"}  # the baseline is not there
    for entry in entries[1:]:
        try:
            validate({**raw, "algorithms": [entry], "eval": alone})
        except InputError as exc:
            raise InputError("--compare", f"{_rule(entry)}: cannot run over this app: "
                             f"{_about_entry(exc, where, entry)}") from None


def check_model(scn: Scenario) -> None:
    """Refuse the ``--compare`` rules of ``scn`` (its entries after the ServerApp's) in one line when the app gives
    them no model: with the app's model (``model: flower_app``) they take its ServerApp's first train message's
    arrays, which this probes once, as each of their runs will (:func:`simfl.launch.experiment.app_model`; the first
    seed), so that a vertical or analytics app is refused before anything runs."""
    from simfl.algorithms.configs import run_name
    from simfl.launch.experiment import app_model
    from simfl.models.configs import FlowerAppModelConfig

    if not isinstance(scn.model, FlowerAppModelConfig) or len(scn.algorithms) < 2:
        return
    clients = scn.stated_clients()
    assert clients is not None, "simfl flwr run states its clients (data.partition.clients)"
    flower_log = logging.getLogger("flwr")  # its warnings come again from each run's own start of main
    level = flower_log.level
    flower_log.setLevel(logging.ERROR)
    try:
        app_model(scn.model, clients, scn.seeds[0])
    except InputError as exc:
        rules = ", ".join(run_name(a) for a in scn.algorithms[1:])
        raise InputError("--compare", f"{rules}: cannot run over this app: {exc.message}") from None
    finally:
        flower_log.setLevel(level)
