"""Checks the Helm chart offline (run by deploy/chart-check.sh inside its venv).

1. lint (strict) with the default and the production values;
2. render with default, production and every-option values and validate every
   manifest against the Kubernetes OpenAPI schemas (strict: unknown fields fail),
   for the oldest and the newest Kubernetes the chart supports;
3. values.schema.json rejects values of the wrong type, unknown keys and
   missing connection settings — both in schema validation and at render time;
4. writes the rendered manifests for the security scan that follows.
"""

import copy
import pathlib
import sys

import helm_python as helm
import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "dialectic"
OUT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dialectic-chart")
KUBE_VERSIONS = ["1.29.0", "1.37.0"]
SERVICES = ["gateway", "planner", "executor", "renderer", "indexer", "wallet"]
# Custom resources: not in the Kubernetes schemas; checked for shape below.
CRD_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"),
}

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL {msg}")


def load_values(name):
    return yaml.safe_load((CHART / name).read_text())


def every_option(prod):
    """Production values plus the options production leaves off."""
    v = copy.deepcopy(prod)
    v["grpcRoute"] = {
        "enabled": True,
        "parentRefs": [{"name": "public", "namespace": "gateway-system"}],
        "hostnames": ["dialectic.example.com"],
    }
    v["secrets"] = {
        "existingSecret": "",
        "databaseUrl": "postgres://dialectic:pw@db:5432/dialectic",
        "amqpUrl": "amqps://dialectic:pw@mq:5671/%2f",
        "redisUrl": "rediss://redis:6380",
        "s3AccessKey": "AKIA",
        "s3SecretKey": "secret",
    }
    v["modelKeys"] = {"existingSecret": "", "values": {"OPENAI_API_KEY": "sk-test"}}
    return v


def render(chart, values, label):
    try:
        out = chart.render(values, name="dialectic", namespace="dialectic", is_install=True)
    except helm.HelmError as e:
        fail(f"{label}: render: {e}")
        return []
    docs = []
    text = []
    for path, manifest in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            if "port-forward" not in manifest and "Ingress" not in manifest and "GRPCRoute" not in manifest:
                fail(f"{label}: NOTES.txt does not tell how to reach the gateway")
            continue
        for doc in yaml.safe_load_all(manifest):
            if doc:
                docs.append(doc)
        text.append(f"# Source: {path}\n{manifest}")
    (OUT / label).mkdir(parents=True, exist_ok=True)
    (OUT / label / "manifests.yaml").write_text("\n---\n".join(text))
    return docs


def validate(docs, label):
    kinds = {}
    for doc in docs:
        kind, api = doc.get("kind"), doc.get("apiVersion")
        name = doc.get("metadata", {}).get("name", "?")
        kinds[kind] = kinds.get(kind, 0) + 1
        if (api, kind) in CRD_KINDS:
            if not name or not isinstance(doc.get("spec"), dict):
                fail(f"{label}: {kind}/{name}: needs metadata.name and spec")
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                fail(f"{label}: {kind}/{name} (k8s {version}): {e.message} at {list(e.path)}")
            except kubernetes_validate.SchemaNotFoundError:
                fail(f"{label}: {kind}/{name}: no schema for {api} in k8s {version}")
    return kinds


def check_shape(docs, label, values):
    """What the issue asks of every service, beyond schema validity."""
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    for svc in SERVICES:
        for kind in ["Deployment", "Service", "ServiceAccount"]:
            if (kind, f"dialectic-{svc}") not in by:
                fail(f"{label}: missing {kind} dialectic-{svc}")
        if values["services"][svc]["pdb"]["enabled"] and ("PodDisruptionBudget", f"dialectic-{svc}") not in by:
            fail(f"{label}: missing PodDisruptionBudget dialectic-{svc}")
        dep = by.get(("Deployment", f"dialectic-{svc}"))
        if not dep:
            continue
        pod = dep["spec"]["template"]["spec"]
        c = pod["containers"][0]
        sc = c.get("securityContext", {})
        if not (sc.get("runAsNonRoot") and sc.get("readOnlyRootFilesystem")
                and sc.get("allowPrivilegeEscalation") is False
                and sc.get("capabilities", {}).get("drop") == ["ALL"]):
            fail(f"{label}: {svc}: securityContext is not locked down: {sc}")
        if c["args"] != ["run", "--services", svc]:
            fail(f"{label}: {svc}: args {c['args']}")
        if c["livenessProbe"]["grpc"].get("service") != "dialectic.liveness" or "grpc" not in c["readinessProbe"]:
            fail(f"{label}: {svc}: probes are not gRPC health checks")
    if ("Job", "dialectic-migrate") not in by:
        fail(f"{label}: missing migrate Job")
    else:
        hook = by[("Job", "dialectic-migrate")]["metadata"]["annotations"]["helm.sh/hook"]
        if hook != "pre-install,pre-upgrade":
            fail(f"{label}: migrate Job hook is {hook}")


def expect_rejected(chart, values, why):
    """A bad value must fail schema validation and therefore the install."""
    try:
        chart.validate_schema(values)
    except helm.HelmValuesError as e:
        print(f"ok   schema rejects {why}: {' '.join(str(e).split())[:150]}")
    else:
        fail(f"values.schema.json accepted {why}")
        return
    try:
        chart.render(values, name="dialectic", namespace="dialectic", is_install=True)
    except helm.HelmError:
        pass
    else:
        fail(f"render (install) accepted {why}")


def main():
    chart = helm.Chart.load(str(CHART))
    defaults = load_values("values.yaml")
    prod = load_values("values-production.yaml")
    merged_prod = chart.merge_values(prod)

    for label, values in [("default", None), ("production", prod)]:
        report = helm.lint(str(CHART), values, strict=True, namespace="dialectic")
        errors = report.get("errors") or []
        bad = [m for m in report.get("messages", []) if m["severity"] >= 2]
        for m in bad:
            fail(f"lint {label}: {m['path']}: {m['error']}")
        for e in errors:
            fail(f"lint {label}: {e}")
        if not bad and not errors:
            print(f"ok   helm lint --strict ({label} values)")

    for label, values, full in [
        ("default", None, defaults),
        ("production", prod, merged_prod),
        ("every-option", every_option(prod), chart.merge_values(every_option(prod))),
    ]:
        docs = render(chart, values, label)
        kinds = validate(docs, label)
        check_shape(docs, label, full)
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"ok   {label}: {len(docs)} manifests validated against k8s {' and '.join(KUBE_VERSIONS)}: {summary}")

    wrong = copy.deepcopy(defaults)
    wrong["services"]["gateway"]["replicas"] = "two"
    expect_rejected(chart, {"services": wrong["services"]}, "a string for services.gateway.replicas")
    expect_rejected(chart, {"metrics": {"port": 70000}}, "metrics.port 70000")
    expect_rejected(chart, {"image": {"pullPolicy": "Sometimes"}}, "image.pullPolicy Sometimes")
    expect_rejected(chart, {"keda": {"enabled": "yes"}}, "a string for keda.enabled")
    expect_rejected(chart, {"servcies": {}}, "an unknown top-level key (typo)")
    expect_rejected(chart, {"secrets": {"databaseUrl": ""}}, "no database URL and no existing Secret")
    expect_rejected(chart, {"image": {"digest": "latest"}}, "a digest that is not sha256")

    if failures:
        print(f"{len(failures)} chart check(s) failed")
        sys.exit(1)
    print("chart checks passed")


if __name__ == "__main__":
    main()
