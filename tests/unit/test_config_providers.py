"""Issue 44, part 1: ``${provider:[path:]key}`` references (KIP-297) resolved at load, as Kafka's providers do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from mm2py.config import load, load_text
from mm2py.config.providers import DirectoryConfigProvider, EnvVarConfigProvider, FileConfigProvider
from mm2py.config.transform import REFERENCE, Reference
from mm2py.errors import ConfigError, ConfigProviderError

AB = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
JAVA = "org.apache.kafka.common.config.provider."
SECRET = "s3cr3t-Pa55"


def providers(allowed: Path | None = None, allowlist: str | None = None) -> str:
    text = (f"config.providers = file, dir, env\n"
            f"config.providers.file.class = {JAVA}FileConfigProvider\n"
            f"config.providers.dir.class = {JAVA}DirectoryConfigProvider\n"
            f"config.providers.env.class = {JAVA}EnvVarConfigProvider\n")
    if allowed is not None:
        text += (f"config.providers.file.param.allowed.paths = {allowed}\n"
                 f"config.providers.dir.param.allowed.paths = {allowed}\n")
    if allowlist is not None:
        text += f"config.providers.env.param.allowlist.pattern = {allowlist}\n"
    return text


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    (tmp_path / "secrets.properties").write_text(f"password = {SECRET}\nuser: alice\nport=9093\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "truststore.password").write_text(f"{SECRET}\n")  # as `echo` writes a secret
    return tmp_path


@pytest.mark.parametrize(("text", "provider", "path", "key"), [
    ("${file:/etc/kafka/secrets.properties:password}", "file", "/etc/kafka/secrets.properties", "password"),
    ("${env:VAR}", "env", "", "VAR"),
    ("${env::VAR}", "env", "", "VAR"),
    ("${vault:secret/data/kafka:a:b}", "vault", "secret/data/kafka", "a:b"),  # the path ends at the second colon
])
def test_references_are_read_with_kafkas_pattern(text: str, provider: str, path: str, key: str) -> None:
    [match] = REFERENCE.finditer(f"x{text}y")
    assert Reference.of(match) == Reference(provider, path, key, text)


def test_file_dir_and_env_references_resolve_everywhere(secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2_KEY_PASSWORD", SECRET + "-env")
    props = secrets / "secrets.properties"
    text = AB + providers() + (
        f'A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'username="${{file:{props}:user}}" password="${{file:{props}:password}}";\n'
        f"B.ssl.truststore.password = ${{dir:{secrets / 'run'}:truststore.password}}\n"
        "B.ssl.key.password = ${env:MM2_KEY_PASSWORD}\n"
        "B.ssl.keystore.password = ${env::MM2_KEY_PASSWORD}\n"
        f"A->B.replication.factor = ${{file:{props}:port}}\n"
    )
    flow = load_text(text).enabled_flows[0]
    assert flow.source.consumer["sasl.jaas.config"].endswith(f'username="alice" password="{SECRET}";')
    # a directory's file is taken whole; the setting's own reading trims it, as Kafka's ConfigDef does
    assert flow.target.producer["ssl.truststore.password"] == SECRET
    assert flow.target.producer["ssl.key.password"] == flow.target.producer["ssl.keystore.password"] == SECRET + "-env"
    assert flow.metadata.replication_factor == 9093


def test_a_directory_file_is_kept_byte_for_byte(secrets: Path) -> None:
    provider = DirectoryConfigProvider()
    provider.configure({})
    (secrets / "run" / "sub").mkdir()
    assert provider.get(str(secrets / "run"), {"truststore.password", "sub", "../secrets.properties", "none"}) == {
        "truststore.password": f"{SECRET}\n"}


def test_yaml_goes_through_the_same_resolution(secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2_PW", SECRET)
    path = secrets / "mm2.yaml"
    path.write_text(
        "clusters: [A, B]\nA: {bootstrap.servers: 'a:9092'}\nB:\n  bootstrap.servers: b:9092\n"
        "  ssl.keystore.password: ${env:MM2_PW}\n"
        f"  ssl.key.password: '${{file:{secrets / 'secrets.properties'}:password}}'\n"
        "A->B: {enabled: true}\n"
        f"config.providers: env, file\nconfig.providers.env.class: {JAVA}EnvVarConfigProvider\n"
        f"config.providers.file.class: {JAVA}FileConfigProvider\n")
    producer = load(path).enabled_flows[0].target.producer
    assert producer["ssl.keystore.password"] == producer["ssl.key.password"] == SECRET


def test_a_python_provider_plugs_in_by_dotted_path() -> None:
    text = AB + ("config.providers = vault\nconfig.providers.vault.class = tests.plugins.VaultProvider\n"
                 f"config.providers.vault.param.secrets = kafka/prod/password={SECRET};kafka/prod/user=bob\n"
                 "B.ssl.key.password = ${vault:kafka/prod:password}\n")
    assert load_text(text).enabled_flows[0].target.producer["ssl.key.password"] == SECRET


def test_the_provider_keys_are_neither_unknown_nor_warned(secrets: Path) -> None:
    with capture_logs() as logs:
        load_text(AB + providers(secrets) + f"B.ssl.key.password = ${{file:{secrets}/secrets.properties:password}}\n")
    assert [e for e in logs if e["log_level"] == "warning"] == []


def test_allowed_paths_as_kip_993(secrets: Path) -> None:
    provider = FileConfigProvider()
    provider.configure({"allowed.paths": f"{secrets}/run,{secrets}/secrets.properties"})
    assert provider.get(f"{secrets}/run/../secrets.properties", {"user"}) == {"user": "alice"}
    with pytest.raises(ConfigProviderError, match="outside allowed.paths"):
        provider.get(f"{secrets}/run/../../etc/passwd", {"root"})
    for bad, why in (("relative/dir", "not absolute"), (f"{secrets}/nothing", "does not exist")):
        with pytest.raises(ConfigProviderError, match=why):
            FileConfigProvider().configure({"allowed.paths": bad})


def test_env_allowlist_pattern_matches_whole_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2_SECRET", "a")
    monkeypatch.setenv("HOME_SECRET", "b")
    provider = EnvVarConfigProvider()
    provider.configure({"allowlist.pattern": "MM2_.*"})
    assert provider.get("", {"MM2_SECRET", "UNSET_X"}) == {"MM2_SECRET": "a"}
    with pytest.raises(ConfigProviderError, match="does not match allowlist.pattern"):
        provider.get("", {"HOME_SECRET"})
    assert os.environ["HOME_SECRET"] == "b"


def bad_cases(secrets: Path) -> dict[str, tuple[str, str]]:
    """Each bad reference -> (the extra lines, what the problem says); the last line holds the key at fault."""
    props = secrets / "secrets.properties"
    return {
        "unknown provider": ("B.ssl.key.password = ${vault:kafka:password}\n", "no config provider 'vault'"),
        "missing file": (f"B.ssl.key.password = ${{file:{secrets}/gone.properties:password}}\n",
                         "No such file or directory"),
        "missing key": (f"B.ssl.key.password = ${{file:{props}:passwd}}\n", "has no 'passwd'"),
        "missing dir file": (f"B.ssl.key.password = ${{dir:{secrets}/run:key.password}}\n", "has no 'key.password'"),
        "missing variable": ("B.ssl.key.password = ${env:MM2PY_UNSET_VARIABLE}\n", "has no 'MM2PY_UNSET_VARIABLE'"),
        "outside allowed.paths": (f"config.providers.dir.param.allowed.paths = {secrets}/run\n"
                                  f"B.ssl.key.password = ${{dir:{secrets}:secrets.properties}}\n", "outside allowed"),
        "variable not allowed": ("config.providers.env.param.allowlist.pattern = KAFKA_.*\n"
                                 "B.ssl.key.password = ${env:MM2PY_TEST_SECRET}\n", "does not match allowlist"),
        "env with a path": ("B.ssl.key.password = ${env:/x:MM2PY_TEST_SECRET}\n", "takes no path"),
        "a plugin that fails": ("config.providers = vault\nconfig.providers.vault.class = tests.plugins.VaultProvider\n"
                                "B.ssl.key.password = ${vault:sealed:pw}\n", "ConnectionError: vault is sealed"),
        "a Java class": ("config.providers = vault\nB.ssl.key.password = ${vault:x:y}\n"
                         "config.providers.vault.class = com.bank.VaultConfigProvider\n",
                         "a Java provider needs a Python port"),
        "a resolved value that fails validation": (f"A->B.tasks.max = ${{file:{props}:password}}\n",
                                                   "expected an integer"),
    }


@pytest.mark.parametrize("case", list(bad_cases(Path("/x"))))
def test_each_bad_reference_is_one_line_naming_key_line_and_provider_never_the_secret(
        case: str, secrets: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM2PY_TEST_SECRET", SECRET)
    extra, says = bad_cases(secrets)[case]
    text = AB + providers() + extra
    source = str(secrets / "mm2.properties")
    with pytest.raises(ConfigError) as err:
        load_text(text, source)
    [problem] = err.value.problems
    line = text.count("\n", 0, text.index(extra.splitlines()[-1])) + 1
    key = extra.splitlines()[-1].partition(" = ")[0]
    assert "\n" not in str(problem) and str(problem).startswith(f"{source}:{line}, key '{key}': "), str(problem)
    assert says in problem.message, problem.message
    if "${" in problem.message:
        assert "config provider" in problem.message
    assert SECRET not in str(err.value) and "alice" not in str(err.value)
