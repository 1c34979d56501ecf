"""Checks the Helm chart offline (run by deploy/chart-check.sh inside its venv).

0. the chart's files match the digest recorded for its version (.chart-digest),
   its CHANGELOG has the version, and the README's values table is the one
   values.schema.json's descriptions generate (--update-digest, --update-readme);
1. lint (strict) with the default, production and quickstart values;
2. render with default, production, every-option, derived-keys, some-disabled, EKS,
   quickstart and quickstart-mirror values (each
   twice: the two renders must be byte-identical) and validate every
   manifest against the Kubernetes OpenAPI schemas (strict: unknown fields fail),
   for the oldest and the newest Kubernetes the chart supports; check what each
   option promises (extension points, global.imageRegistry on every image, the
   alerts' thresholds, runbook anchors and absent() rules, the dashboard, the
   bootstrap hook Job);
3. values.schema.json rejects values of the wrong type, unknown keys and
   missing connection settings — both in schema validation and at render time;
4. writes the rendered manifests for the security scan that follows.
"""

import copy
import hashlib
import json
import pathlib
import re
import sys
import urllib.parse

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "dialectic"
OPTIONS = [a for a in sys.argv[1:] if a.startswith("--")]
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
OUT = pathlib.Path(ARGS[0] if ARGS else "/tmp/dialectic-chart")
DIGEST_FILE = CHART / ".chart-digest"
# Not part of what a version is: the record itself, and the notes written with a bump.
DIGEST_EXCLUDED = {".chart-digest", "CHANGELOG.md"}
KUBE_VERSIONS = ["1.29.0", "1.37.0"]
SERVICES = ["gateway", "planner", "executor", "renderer", "indexer", "wallet"]
# Custom resources: not in the Kubernetes schemas; validated against the
# schemas in deploy/crd-schemas (see its README).
CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "triggerauthentication.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.json",
    ("gateway.networking.k8s.io/v1", "GRPCRoute"): "grpcroute.json",
}
CRD_VALIDATORS = {
    key: jsonschema.Draft7Validator(json.loads((ROOT / "deploy" / "crd-schemas" / name).read_text()))
    for key, name in CRD_SCHEMAS.items()
}

failures = []
RENDERED_NOTES = {}   # label: the NOTES.txt those values render


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
    v["modelKeys"] = {"existingSecret": "", "values": {"OPENAI_API_KEY": "sk-test"},
                      "services": ["executor", "indexer"]}
    v["topologySpread"] = {"zone": True, "hostname": False, "maxSkew": 2}
    v["models"] = [
        {"name": "gpt-5-mini", "provider": "openai", "key_env": "OPENAI_API_KEY", "context_window": 400000,
         "max_output": 128000, "reasoning": True, "reasoning_effort": "low", "fallback": "simulated",
         "input_cost": 0.25, "output_cost": 2},
        {"name": "simulated", "provider": "simulated", "context_window": 16384, "max_output": 4096},
    ]
    # Production names its own service-keys Secret; here the fallback: keys
    # derived from a token secret given in values (rendered, checksummed).
    v["internal"] = {"existingSecret": "", "tokenSecret": "x" * 48,
                     "serviceKeys": {"enabled": False, "existingSecret": ""}}
    v["migrations"] = {
        "podAnnotations": {"sidecar.istio.io/inject": "false"},
        "podLabels": {"example.com/tier": "jobs"},
        "nodeSelector": {"example.com/pool": "system"},
        "tolerations": [{"key": "system", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
        "priorityClassName": "dialectic-workers",
        "extraEnv": {"PGSSLMODE": "verify-full"},
        "extraEnvFrom": [{"secretRef": {"name": "db-extra"}}],
        "extraVolumes": [{"name": "db-ca", "secret": {"secretName": "db-ca"}}],
        "extraVolumeMounts": [{"name": "db-ca", "mountPath": "/etc/dialectic/db-ca", "readOnly": True}],
    }
    # The gateway serves TLS here, so the session test names a URL its certificate names.
    v.setdefault("tests", {})["session"] = {"apiKeySecret": "dialectic-test-key", "gatewayUrl": "https://dialectic.example.com",
                                            "caSecret": "dialectic-ca", "timeoutSeconds": 600}
    v["podAntiAffinity"] = {"mode": "hard", "topologyKey": "topology.kubernetes.io/zone", "weight": 100}
    v["bootstrap"] = {
        "adminKeySecret": {"name": "dialectic-admin-key", "key": "key"},
        "adminUser": "00000000-0000-0000-0000-000000000001",
        "credits": [{"amount": 1000000}, {"user": "00000000-0000-0000-0000-000000000002", "amount": 5000,
                                          "reason": "trial"}],
        "pipelines": {"notes": (ROOT / "tests" / "pipelines" / "notes.toml").read_text()},
        "pipelinesConfigMap": "team-pipelines",
    }
    # The extension points (check_extensions finds each in the render).
    v["global"] = {"imageRegistry": REGISTRY}
    v.update(copy.deepcopy(COMMON))
    v["extraObjects"] = [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "{{ .Release.Name }}-extra-map", "namespace": "{{ .Release.Namespace }}"},
         "data": {"release": "{{ .Release.Name }}"}},
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra-string\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n  port: \"{{ .Values.services.gateway.port }}\"\n",
    ]
    v["probes"] = {"liveness": {"initialDelaySeconds": 7, "periodSeconds": 11, "timeoutSeconds": 2, "failureThreshold": 4},
                   "readiness": {"initialDelaySeconds": 1, "periodSeconds": 6, "timeoutSeconds": 2, "failureThreshold": 3},
                   "startup": {"initialDelaySeconds": 0, "periodSeconds": 3, "timeoutSeconds": 2, "failureThreshold": 40}}
    v["services"]["gateway"]["service"] = {
        "type": "LoadBalancer", "annotations": {"service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"},
        "loadBalancerIP": "10.0.0.10", "loadBalancerSourceRanges": ["10.0.0.0/8"]}
    v["services"]["gateway"]["probes"] = {"liveness": {"timeoutSeconds": 5}}
    for name in ("planner", "indexer", "wallet"):   # the executor and renderer: KEDA in production
        v["services"][name]["autoscaling"] = {"enabled": True, "minReplicas": 2, "maxReplicas": 6,
                                              "targetCPUUtilizationPercentage": 65}
    # Thresholds and a runbook page no default has: check_monitoring finds each in the rules.
    v["metrics"]["prometheusRule"].update({
        "queueBacklog": 1234, "outboxBacklog": 4321, "deadLetters": 7, "modelCallFailureRatio": 0.37,
        "grpcErrorRatio": 0.09, "runbookBaseUrl": "https://runbooks.example.com/dialectic/OPERATIONS.md"})
    v["gateway"] = {"tls": {"secretName": "dialectic-gateway-tls", "healthPort": 7050}}
    v["services"]["executor"].update({
        "terminationGracePeriodSeconds": 700,
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}},
        "podAnnotations": {"example.com/team": "ml"},
        "podLabels": {"example.com/tier": "workers"},
        "nodeSelector": {"example.com/pool": "workers"},
        "tolerations": [{"key": "workers", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "example.com/spot", "operator": "NotIn", "values": ["true"]}]}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                       "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "executor"}}}],
        "extraEnvFrom": [{"secretRef": {"name": "extra-provider-keys"}}],
        "extraVolumes": [{"name": "ca", "configMap": {"name": "corporate-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corporate", "readOnly": True}],
        "initContainers": [locked_down_container("wait-for-proxy", probes=False)],
        "extraContainers": [locked_down_container("egress-proxy", probes=True)],
    })
    return v


REGISTRY = "mirror.example.com/dialectic"
# On every object: the hook Jobs' (some-disabled) and the quickstart's (quickstart-mirror) too.
COMMON = {"commonLabels": {"example.com/cost-center": "ml-platform"},
          "commonAnnotations": {"example.com/owner": "team-ml"}}


def locked_down_container(name, probes):
    """A container spec that passes the security scan, as an operator's sidecar would have to."""
    c = {"name": name, "image": "docker.io/envoyproxy/envoy:v1.32.3@sha256:" + "1" * 64,
         "imagePullPolicy": "IfNotPresent",
         "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                             "runAsNonRoot": True, "runAsUser": 65532, "capabilities": {"drop": ["ALL"]},
                             "seccompProfile": {"type": "RuntimeDefault"}},
         "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}}
    if probes:
        c["livenessProbe"] = c["readinessProbe"] = {"tcpSocket": {"port": 15000}}
    return c


def some_disabled():
    """Defaults with two services off, the alerts and KEDA on, and images from a
    mirror (the hook Job, the migrate Job and the test Pod among them)."""
    return {"global": {"imageRegistry": REGISTRY}, **COMMON,
            "services": {"renderer": {"enabled": False}, "indexer": {"enabled": False}},
            "keda": {"enabled": True},
            "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}}


def derived_keys():
    """The defaults with per-service keys off: the hook Job creates the shared
    internal secret every key is derived from."""
    return {"internal": {"serviceKeys": {"enabled": False}}}


def helm_merge(base, over):
    """Values files given in order (-f a -f b): later maps merge into earlier ones."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = helm_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def render(chart, values, label):
    try:
        out = chart.render(values, name="dialectic", namespace="dialectic", is_install=True)
        # GitOps (Argo CD, Flux's drift detection) renders again on every sync:
        # the same values must give the same bytes, or every sync replaces
        # something (a fresh random secret, a reset replica count).
        again = chart.render(values, name="dialectic", namespace="dialectic", is_install=True)
    except helm.HelmError as e:
        fail(f"{label}: render: {e}")
        return []
    differ = sorted(p for p in set(out) | set(again) if out.get(p) != again.get(p))
    if differ:
        fail(f"{label}: two renders of the same values differ in {differ}")
    else:
        print(f"ok   {label}: two renders are byte-identical ({len(out)} files)")
    docs = []
    text = []
    for path, manifest in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            RENDERED_NOTES[label] = manifest
            if "port-forward" not in manifest and "Ingress" not in manifest and "GRPCRoute" not in manifest:
                fail(f"{label}: NOTES.txt does not tell how to reach the gateway")
            continue
        try:
            docs += [doc for doc in yaml.safe_load_all(manifest) if doc]
        except yaml.YAMLError as e:
            fail(f"{label}: {path} is not YAML: {' '.join(str(e).split())[:200]}")
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
        if (api, kind) in CRD_VALIDATORS:
            for e in CRD_VALIDATORS[(api, kind)].iter_errors(doc):
                fail(f"{label}: {kind}/{name}: {e.message} at {list(e.path)}")
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                fail(f"{label}: {kind}/{name} (k8s {version}): {e.message} at {list(e.path)}")
            except kubernetes_validate.SchemaNotFoundError:
                fail(f"{label}: {kind}/{name}: no schema for {api} in k8s {version}")
    return kinds


def check_templates_stateless():
    """No template reads the cluster or draws randomness: `helm template` (Argo CD)
    gets nothing from lookup, and a random value changes on every render."""
    for path in sorted((CHART / "templates").rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text()
        for word in ["lookup ", "randAlphaNum", "randAlpha ", "randAscii", "randNumeric", "randBytes",
                     "uuidv4", "genPrivateKey", "genCA", "genSelfSignedCert", " now "]:
            if word in text:
                fail(f"{path.relative_to(CHART)} uses {word.strip()}: the render would depend on the cluster or on chance")
    print("ok   templates use no lookup and no randomness")


def check_shape(docs, label, values):
    """What the issue asks of every service, beyond schema validity."""
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    check_secrets(by, label, values)
    check_command_lines(docs, label, values)
    check_extensions(docs, by, label, values)
    for svc in enabled_services(values):
        for kind in ["Deployment", "Service", "ServiceAccount"]:
            if (kind, f"dialectic-{svc}") not in by:
                fail(f"{label}: missing {kind} dialectic-{svc}")
        if values["services"][svc]["pdb"]["enabled"] and ("PodDisruptionBudget", f"dialectic-{svc}") not in by:
            fail(f"{label}: missing PodDisruptionBudget dialectic-{svc}")
        pdb = by.get(("PodDisruptionBudget", f"dialectic-{svc}"))
        if pdb and pdb["spec"].get("unhealthyPodEvictionPolicy") != "AlwaysAllow":
            fail(f"{label}: {svc}: the PDB lets a pod that is not ready block node drains")
        dep = by.get(("Deployment", f"dialectic-{svc}"))
        if not dep:
            continue
        autoscaled = ((svc == "gateway" and values["gatewayAutoscaling"]["enabled"])
                      or (svc in ("executor", "renderer") and values["keda"]["enabled"])
                      or values["services"][svc].get("autoscaling", {}).get("enabled"))
        if autoscaled and "replicas" in dep["spec"]:
            fail(f"{label}: {svc}: an autoscaler owns the count, but the Deployment sets replicas")
        if not autoscaled and dep["spec"].get("replicas") != values["services"][svc]["replicas"]:
            fail(f"{label}: {svc}: replicas {dep['spec'].get('replicas')}, values say {values['services'][svc]['replicas']}")
        annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
        owned = ["checksum/config"]
        if not values["secrets"]["existingSecret"] or values["modelKeys"]["values"]:
            owned.append("checksum/secret")
        internal = values["internal"]
        if not internal["serviceKeys"]["enabled"] and internal["tokenSecret"] and not internal["existingSecret"]:
            owned.append("checksum/internal")
        for key in owned:
            if key not in annotations:
                fail(f"{label}: {svc}: no {key} annotation: a change to what the chart renders would not restart the pods")
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
        check_shutdown(pod, c, svc, label, values)
        check_service_identity(pod, svc, label, values)
        if not pod.get("topologySpreadConstraints"):
            fail(f"{label}: {svc}: no topology spread")
    check_placement(by, label, values)
    check_internal_urls(by, label, values)
    check_gateway_policy(by, label, values)
    check_gateway_tls(by, label, values)
    check_tests(by, label, values)
    check_monitoring(by, label, values)
    if values["quickstart"]["enabled"]:
        check_quickstart(by, label, values)
    elif ("Job", "dialectic-migrate") not in by:
        fail(f"{label}: missing migrate Job")
    else:
        job = by[("Job", "dialectic-migrate")]
        hook = job["metadata"]["annotations"]["helm.sh/hook"]
        if hook != "pre-install,pre-upgrade":
            fail(f"{label}: migrate Job hook is {hook}")
        check_migrate_extensions(job, label, values)
    migrate = [doc for (kind, name), doc in by.items() if kind == "Job" and name.startswith("dialectic-migrate")]
    if migrate:
        check_models(by, label, values, migrate[0])
    check_bootstrap(by, label, values)


def enabled_services(values):
    return [s for s in SERVICES if values["services"][s].get("enabled", True)]


def pod_spec(doc):
    """The pod spec of a workload or Pod, or None."""
    spec = doc.get("spec") or {}
    if doc["kind"] == "Pod":
        return spec
    if doc["kind"] == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    return spec.get("template", {}).get("spec") if "template" in spec else None


def check_extensions(docs, by, label, values):
    """The extension points: global.imageRegistry on every image, commonLabels and
    commonAnnotations on every object, extraObjects rendered through tpl, and per
    service enabled, extra and init containers, the Service's type, annotations
    and load balancer fields, probe timings and an HPA."""
    registry = values["global"].get("imageRegistry", "").rstrip("/")
    extra = set()
    for i, obj in enumerate(values.get("extraObjects") or []):
        text = obj if isinstance(obj, str) else yaml.safe_dump(obj)
        want = yaml.safe_load(text.replace("{{ .Release.Name }}", "dialectic").replace(
            "{{ .Release.Namespace }}", "dialectic").replace(
            "{{ .Values.services.gateway.port }}", str(values["services"]["gateway"]["port"])))
        key = (want["kind"], want["metadata"]["name"])
        extra.add(key)
        if by.get(key) != want:
            fail(f"{label}: extraObjects[{i}] is not rendered through tpl as {key}: {by.get(key)}")
    images = 0
    for doc in docs:
        key = (doc["kind"], doc["metadata"]["name"])
        if key in extra:
            continue
        meta = doc["metadata"]
        for k, v in (values.get("commonLabels") or {}).items():
            if (meta.get("labels") or {}).get(k) != v:
                fail(f"{label}: {key[0]}/{key[1]} lacks commonLabels {k}")
        for k, v in (values.get("commonAnnotations") or {}).items():
            if (meta.get("annotations") or {}).get(k) != v:
                fail(f"{label}: {key[0]}/{key[1]} lacks commonAnnotations {k}")
        pod = pod_spec(doc)
        for c in (pod or {}).get("initContainers", []) + (pod or {}).get("containers", []):
            images += 1
            if registry and not c["image"].startswith(registry + "/"):
                fail(f"{label}: {key[0]}/{key[1]} ({c['name']}) runs {c['image']}, not from global.imageRegistry {registry}")
    for svc in SERVICES:
        cfg = values["services"][svc]
        owned = sorted(k for k, d in by.items() if k not in extra
                       and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == svc)
        if not cfg.get("enabled", True):
            if owned:
                fail(f"{label}: services.{svc}.enabled is false, yet the chart renders {owned}")
            continue
        check_service_extensions(by, label, values, svc)
    if registry:
        print(f"ok   {label}: all {images} container images come from global.imageRegistry {registry}")


def check_service_extensions(by, label, values, svc):
    cfg = values["services"][svc]
    registry = values["global"].get("imageRegistry", "").rstrip("/")
    dep = by[("Deployment", f"dialectic-{svc}")]
    pod = dep["spec"]["template"]["spec"]
    for field, given in [("initContainers", cfg.get("initContainers") or []),
                         ("containers", cfg.get("extraContainers") or [])]:
        rendered = {c["name"]: c for c in pod.get(field, [])}
        for c in given:
            got = rendered.get(c["name"])
            image = c["image"].split("/", 1)[1] if registry and "." in c["image"].split("/")[0] else c["image"]
            if not got or {**got, "image": c["image"]} != c or (registry and got["image"] != f"{registry}/{image}"):
                fail(f"{label}: {svc}: {field} does not hold {c['name']} as given (image under the registry): {got}")
    service = by[("Service", f"dialectic-{svc}")]
    s = cfg["service"]
    spec = service["spec"]
    lb = s["type"] == "LoadBalancer"
    if (spec.get("type") != s["type"] or spec.get("loadBalancerIP") != ((s["loadBalancerIP"] or None) if lb else None)
            or spec.get("loadBalancerSourceRanges") != ((s["loadBalancerSourceRanges"] or None) if lb else None)):
        fail(f"{label}: {svc}: Service type / loadBalancer fields are not services.{svc}.service: {spec}")
    if any(service["metadata"].get("annotations", {}).get(k) != v for k, v in s["annotations"].items()):
        fail(f"{label}: {svc}: Service annotations lack services.{svc}.service.annotations")
    c = pod["containers"][0]
    for probe in ("liveness", "readiness", "startup"):
        want = {**values["probes"][probe], **(cfg.get("probes") or {}).get(probe, {})}
        got = {k: v for k, v in c[f"{probe}Probe"].items() if k != "grpc"}
        if got != want:
            fail(f"{label}: {svc}: {probe} probe timings {got}, values say {want}")
    hpa_values = values["gatewayAutoscaling"] if svc == "gateway" else cfg.get("autoscaling", {})
    hpa = by.get(("HorizontalPodAutoscaler", f"dialectic-{svc}"))
    if hpa_values.get("enabled"):
        if not hpa or hpa["spec"]["scaleTargetRef"]["name"] != f"dialectic-{svc}" or (
                hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) != (hpa_values["minReplicas"], hpa_values["maxReplicas"]):
            fail(f"{label}: {svc}: autoscaling is on, but no HorizontalPodAutoscaler scales it as values say: {hpa and hpa['spec']}")
    elif hpa:
        fail(f"{label}: {svc}: a HorizontalPodAutoscaler, though its autoscaling is off")


# Each alert's threshold, by its key under metrics.prometheusRule; every other
# number an alert compares against is 0 (`up == 0`, "rose at all").
ALERT_THRESHOLDS = {
    "DialecticQueueBacklog": "queueBacklog",
    "DialecticOutboxBacklog": "outboxBacklog",
    "DialecticDeadLetters": "deadLetters",
    "DialecticModelCallsFailing": "modelCallFailureRatio",
    "DialecticGrpcErrors": "grpcErrorRatio",
}
# Gauges every replica of a service reads from Postgres alike: summing them
# across pods multiplies them by the replica count.
PER_REPLICA_GAUGES = ["dialectic_jobs", "dialectic_outbox_pending", "dialectic_wallet_held"]
COMPARISON = re.compile(r"(?:[<>]=?|[!=]=)\s*(-?[0-9][0-9.eE+-]*)(?![\w\]])")
AGGREGATION = re.compile(r"\b(sum|max|min|avg|count|group|stddev|stdvar|topk|bottomk|quantile|count_values)"
                         r"\s*(?:(?:by|without)\s*\([^()]*\)\s*)?$")


def enclosing_aggregation(expr, at):
    """The aggregation operator innermost around position `at` of a PromQL
    expression (prefix form, `sum by (x) (…)`), or None: walks out through the
    unmatched parentheses left of it, skipping functions such as rate()."""
    depth = 0
    for i in range(at - 1, -1, -1):
        if expr[i] == ")":
            depth += 1
        elif expr[i] == "(":
            if depth:
                depth -= 1
                continue
            m = AGGREGATION.search(expr[:i])
            if m:
                return m.group(1)
    return None


def per_replica_sums(expr):
    """The per-replica gauges `expr` aggregates with anything but max or min."""
    bad = []
    for gauge in PER_REPLICA_GAUGES:
        for m in re.finditer(rf"\b{gauge}\b(?!_)", expr):
            op = enclosing_aggregation(expr, m.start())
            if op not in ("max", "min"):
                bad.append(f"{op or 'no aggregation'} over {gauge}")
    return bad


def github_anchors(markdown):
    """The anchors GitHub gives a Markdown file's headings (fenced code skipped)."""
    anchors, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def check_monitoring(by, label, values):
    """The PrometheusRule and the dashboard: thresholds rendered from values
    (no other number but 0), per-replica gauges taken with max, a runbook_url
    on every alert naming an anchor deploy/OPERATIONS.md has, and an absent()
    rule for every component the release runs, on the label its scrape sets."""
    metrics = values["metrics"]
    rule = metrics["prometheusRule"]
    doc = by.get(("PrometheusRule", "dialectic"))
    if rule["enabled"] != bool(doc):
        fail(f"{label}: prometheusRule.enabled is {rule['enabled']}, PrometheusRule rendered: {bool(doc)}")
    dashboard = by.get(("ConfigMap", "dialectic-dashboard"))
    if dashboard:
        panels = json.loads(dashboard["data"]["dialectic.json"])["panels"]
        for panel in panels:
            for target in panel.get("targets", []):
                for bad in per_replica_sums(target.get("expr", "")):
                    fail(f"{label}: dashboard panel {panel.get('title')!r} takes {bad}: {target['expr']}")
    if not doc:
        return
    anchors = github_anchors((ROOT / "deploy" / "OPERATIONS.md").read_text())
    base = rule["runbookBaseUrl"].rstrip("#") + "#"
    rules = [r for g in doc["spec"]["groups"] for r in g["rules"] if "alert" in r]
    absent = set()
    for r in rules:
        name, expr = r["alert"], r["expr"]
        key = ALERT_THRESHOLDS.get(name)
        numbers = [float(n) for n in COMPARISON.findall(expr)]
        if key and float(rule[key]) not in numbers:
            fail(f"{label}: {name} does not compare against metrics.prometheusRule.{key} ({rule[key]}): {expr}")
        hard = [n for n in numbers if n != 0 and (not key or n != float(rule[key]))]
        if hard:
            fail(f"{label}: {name} compares against {hard}, which no value sets: {expr}")
        for bad in per_replica_sums(expr):
            fail(f"{label}: {name} takes {bad}: {expr}")
        url = r.get("annotations", {}).get("runbook_url", "")
        if not url.startswith(base):
            fail(f"{label}: {name}: runbook_url {url!r} is not on metrics.prometheusRule.runbookBaseUrl {base}")
        elif url[len(base):] not in anchors:
            fail(f"{label}: {name}: runbook_url {url!r}: deploy/OPERATIONS.md has no heading with anchor "
                 f"#{url[len(base):]}")
        m = re.fullmatch(r'absent\(up\{namespace="dialectic", service="([^"]+)"\}\)', expr)
        if m:
            absent.add(m.group(1))
    # The Prometheus Operator labels a ServiceMonitor's targets with their Service's name.
    scraped = {name for (kind, name), d in by.items() if kind == "Service"
               and any(p["name"] == "metrics" for p in d["spec"]["ports"])} if metrics["serviceMonitor"]["enabled"] else None
    want = {f"dialectic-{s}" for s in enabled_services(values)}
    if absent != want:
        fail(f"{label}: absent() rules for {sorted(absent)}, expected one per component: {sorted(want)}")
    if scraped is not None and not want <= scraped:
        fail(f"{label}: absent() rules name {sorted(want - scraped)}, which the ServiceMonitor does not scrape")
    print(f"ok   {label}: {len(rules)} alerts: thresholds from values, runbook anchors in OPERATIONS.md, "
          f"{len(absent)} absent() rules, per-replica gauges by max")


# Fields that would hold a model's key itself (dialecticd model sync refuses them too).
INLINE_KEY_FIELDS = {"key", "api_key", "apikey", "api-key", "key_value", "secret", "token", "password"}
MODELS_FILE = "/etc/dialectic/models/models.json"


def check_models(by, label, values, job):
    """`models:` values: rendered as a models file the migrate Job syncs after
    the migrations (`migrate --sync-models`), mounted from a ConfigMap that
    exists before the Job; no key is in it, only variable names."""
    declared = values.get("models") or []
    config = by.get(("ConfigMap", "dialectic-models"))
    c = job["spec"]["template"]["spec"]["containers"][0]
    if not declared:
        if config or c["args"] != ["migrate"]:
            fail(f"{label}: no models declared, yet the chart renders a models file or syncs one: {c['args']}")
        return
    if not config:
        fail(f"{label}: models are declared but no ConfigMap dialectic-models renders them")
        return
    try:
        rendered = json.loads(config["data"]["models.json"])
    except (KeyError, ValueError) as e:
        fail(f"{label}: the models ConfigMap holds no models.json that parses: {e}")
        return
    if rendered != {"models": declared}:
        fail(f"{label}: the rendered models file is not the declared models: {rendered}")
    for m in rendered.get("models", []):
        inline = INLINE_KEY_FIELDS & {k.lower() for k in m}
        if inline:
            fail(f"{label}: model {m.get('name')} holds a key inline ({sorted(inline)})")
        env = m.get("key_env")
        if env is not None and (not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env) or KEYLIKE.fullmatch(env)):
            fail(f"{label}: model {m.get('name')}: key_env {env[:6]!r}… is not a variable name")
    hook = job["metadata"].get("annotations", {}).get("helm.sh/hook")
    if hook and (config["metadata"].get("annotations", {}).get("helm.sh/hook") != hook or int(
            config["metadata"]["annotations"].get("helm.sh/hook-weight", "0")) >= int(
            job["metadata"]["annotations"].get("helm.sh/hook-weight", "0"))):
        fail(f"{label}: the models ConfigMap is not in place before the migrate hook Job")
    if c["args"] != ["migrate", "--sync-models", MODELS_FILE]:
        fail(f"{label}: the migrate Job does not sync {MODELS_FILE} after migrating: {c['args']}")
    volumes = {v["name"]: v for v in job["spec"]["template"]["spec"].get("volumes", [])}
    mounted = [m for m in c.get("volumeMounts", [])
               if volumes.get(m["name"], {}).get("configMap", {}).get("name") == "dialectic-models"]
    if not mounted or MODELS_FILE != mounted[0]["mountPath"].rstrip("/") + "/models.json":
        fail(f"{label}: the migrate Job does not mount the models file at {MODELS_FILE}")
    print(f"ok   {label}: {len(declared)} models rendered into the migrate Job's models file, no key inline")


BOOTSTRAP_FILE = "/etc/dialectic/bootstrap.json"
BOOTSTRAP_HOOK = {"helm.sh/hook": "post-install,post-upgrade", "helm.sh/hook-delete-policy": "before-hook-creation"}


def check_bootstrap(by, label, values):
    """`bootstrap:` values: a ConfigMap with the bootstrap file (and the inline
    pipeline files) and a post-install, post-upgrade hook Job that applies it
    with the chart's image; the administrator's key reaches the Job from its
    Secret through the environment, never through values, the file or argv."""
    b = values.get("bootstrap", {})
    job = by.get(("Job", "dialectic-bootstrap"))
    config = by.get(("ConfigMap", "dialectic-bootstrap"))
    declared = b.get("adminKeySecret", {}).get("name") or b.get("credits") or b.get("pipelines") \
        or b.get("pipelinesConfigMap")
    if not declared:
        if job or config:
            fail(f"{label}: nothing is declared under bootstrap, yet a bootstrap Job or ConfigMap renders")
        return
    if not job or not config:
        fail(f"{label}: bootstrap is declared but the Job or its ConfigMap is missing")
        return
    for doc in (job, config, by.get(("ServiceAccount", "dialectic-bootstrap"))):
        annotations = (doc or {}).get("metadata", {}).get("annotations", {})
        if {k: annotations.get(k) for k in BOOTSTRAP_HOOK} != BOOTSTRAP_HOOK:
            fail(f"{label}: {doc and doc['kind']} dialectic-bootstrap is not a post-install,post-upgrade "
                 f"hook recreated each time: {annotations}")
    if int(config["metadata"]["annotations"]["helm.sh/hook-weight"]) >= int(
            job["metadata"]["annotations"]["helm.sh/hook-weight"]):
        fail(f"{label}: the bootstrap ConfigMap is not in place before the Job")
    pod = job["spec"]["template"]["spec"]
    c = pod["containers"][0]
    if c["image"] != chart_image(by) or c.get("command") or c["args"] != ["bootstrap", "--file", BOOTSTRAP_FILE]:
        fail(f"{label}: the bootstrap Job does not run the chart's image with bootstrap --file {BOOTSTRAP_FILE}: "
             f"{c['image']} {c.get('command')} {c['args']}")
    env = {e["name"]: e for e in c.get("env", [])}
    rendered = json.loads(config["data"]["bootstrap.json"])
    secret = b.get("adminKeySecret", {})
    if secret.get("name"):
        var = rendered.get("admin_key", {}).get("key_env")
        ref = env.get(var, {}).get("valueFrom", {}).get("secretKeyRef")
        if "value" in env.get(var, {}) or ref != {"name": secret["name"], "key": secret["key"]}:
            fail(f"{label}: the bootstrap Job's {var} is not the Secret {secret['name']}'s key {secret['key']}: "
                 f"{env.get(var)}")
        if set(rendered["admin_key"]) - {"key_env", "name", "user"}:
            fail(f"{label}: the bootstrap file holds more than the key's variable name: {rendered['admin_key']}")
    if rendered.get("credits") != (b.get("credits") or []):
        fail(f"{label}: the bootstrap file's credits are not the declared ones: {rendered.get('credits')}")
    inline = {k: v for k, v in config["data"].items() if k != "bootstrap.json"}
    if inline != {f"pipeline.{n}.toml": t for n, t in (b.get("pipelines") or {}).items()}:
        fail(f"{label}: the bootstrap ConfigMap's pipeline files are not the declared ones: {sorted(inline)}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: volumes.get(m["name"], {}) for m in c.get("volumeMounts", [])}
    items = {i["path"] for i in mounts.get("/etc/dialectic", {}).get("configMap", {}).get("items", [])}
    if items != {"bootstrap.json"} | {f"pipelines/{n}.toml" for n in b.get("pipelines") or {}}:
        fail(f"{label}: the bootstrap Job does not mount the file and its pipelines under /etc/dialectic: {items}")
    if b.get("pipelinesConfigMap") and (
            mounts.get("/etc/dialectic-pipelines", {}).get("configMap", {}).get("name") != b["pipelinesConfigMap"]
            or "/etc/dialectic-pipelines" not in rendered["pipelines"]):
        fail(f"{label}: the ConfigMap {b['pipelinesConfigMap']} is not mounted and listed as a pipeline directory")
    print(f"ok   {label}: bootstrap Job (post-install,post-upgrade hook), key from its Secret by secretKeyRef, "
          f"{len(rendered.get('credits', []))} credits, {len(rendered.get('pipelines', []))} pipeline directories")


def chart_image(by):
    """The dialecticd image the release's services run."""
    for (kind, name), doc in sorted(by.items()):
        if kind == "Deployment" and name.startswith("dialectic-"):
            return pod_spec(doc)["containers"][0]["image"]
    return None


QUICKSTART = {"postgres": 5432, "rabbitmq": 5672, "redis": 6379, "s3": 9000}


def check_quickstart(by, label, values):
    """An install with the quickstart values waits on nothing outside the release:
    every URL names a Service the release renders, and migrations run as an
    ordinary Job (a pre-install hook would wait for a Postgres not yet created)."""
    for name, port in QUICKSTART.items():
        svc = by.get(("Service", f"dialectic-{name}"))
        if not svc or svc["spec"]["ports"][0]["port"] != port:
            fail(f"{label}: no quickstart Service dialectic-{name} on port {port}")
        dep = by.get(("Deployment", f"dialectic-{name}"))
        if not dep or dep["spec"]["replicas"] != 1:
            fail(f"{label}: no single-replica quickstart Deployment dialectic-{name}")
        elif "evaluation only" not in dep["metadata"]["annotations"].get("dialectic.dev/quickstart", "").lower():
            fail(f"{label}: dialectic-{name} is not labelled evaluation-only")
    urls = by[("Secret", "dialectic-connections")]["stringData"]
    config = by[("ConfigMap", "dialectic-config")]["data"]
    for key, host in [("DIALECTIC_DATABASE__URL", "@dialectic-postgres:5432/"),
                      ("DIALECTIC_AMQP__URL", "@dialectic-rabbitmq:5672/"),
                      ("DIALECTIC_REDIS__URL", "//dialectic-redis:6379")]:
        if host not in urls.get(key, ""):
            fail(f"{label}: {key} does not name the quickstart Service ({urls.get(key)})")
    if config["DIALECTIC_S3__ENDPOINT"] != "http://dialectic-s3:9000":
        fail(f"{label}: the S3 endpoint is {config['DIALECTIC_S3__ENDPOINT']}, not the quickstart server")
    jobs = {name: doc for (kind, name), doc in by.items() if kind == "Job"}
    migrate = [doc for name, doc in jobs.items() if name.startswith("dialectic-migrate-")]
    if len(migrate) != 1 or "helm.sh/hook" in migrate[0]["metadata"].get("annotations", {}):
        fail(f"{label}: migrations are not one ordinary Job: {sorted(jobs)}")
    if not any(name.startswith("dialectic-bucket-") for name in jobs):
        fail(f"{label}: no Job creates the bucket")
    check_quickstart_s3(by, label)
    for (kind, name), doc in by.items():
        hook = doc["metadata"].get("annotations", {}).get("helm.sh/hook")
        if hook and hook != "test" and kind not in ("Job", "ServiceAccount", "Role", "RoleBinding"):
            fail(f"{label}: {kind}/{name} is a hook")


def check_quickstart_s3(by, label):
    """The quickstart's S3 server is s3s-fs from the chart's own image, serving the
    port its Service names from its data volume; no MinIO image anywhere (MinIO
    stopped publishing community images)."""
    image = by[("Deployment", "dialectic-gateway")]["spec"]["template"]["spec"]["containers"][0]["image"]
    dep = by.get(("Deployment", "dialectic-s3"))
    pod = dep["spec"]["template"]["spec"] if dep else {"containers": [{}]}
    c = pod["containers"][0]
    args = c.get("args") or []
    flag = lambda name: args[args.index(name) + 1] if name in args[:-1] else None
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    if (c.get("image") != image or c.get("command") != ["/usr/local/bin/s3s-fs"] or flag("--port") != "9000"
            or flag("--host") != "0.0.0.0" or not args or args[-1] not in mounts):
        fail(f"{label}: the quickstart S3 server is not s3s-fs from the chart's image {image} on port 9000 "
             f"serving a mounted volume: {c.get('image')} {c.get('command')} {args}")
    for (kind, name), doc in by.items():
        for ctr in (pod_spec(doc) or {}).get("containers", []) + (pod_spec(doc) or {}).get("initContainers", []):
            if "minio" in ctr["image"].lower():
                fail(f"{label}: {kind}/{name} runs {ctr['image']}")


def check_placement(by, label, values):
    """Anti-affinity keeps a service's own replicas apart (never every component's),
    and every PriorityClass a pod names exists: rendered by the chart, or (in
    values without priorityClasses) made outside it."""
    anti = values["podAntiAffinity"]
    created = {pc["name"] for pc in values["priorityClasses"]}
    rendered = {name for kind, name in by if kind == "PriorityClass"}
    if created != rendered:
        fail(f"{label}: PriorityClasses rendered {sorted(rendered)}, values list {sorted(created)}")
    for (kind, name), doc in by.items():
        if kind not in ("Deployment", "Job"):
            continue
        pod = doc["spec"]["template"]["spec"]
        pc = pod.get("priorityClassName")
        if pc and created and pc not in created:
            fail(f"{label}: {kind}/{name} names PriorityClass {pc}, which the chart does not create")
        for terms in (pod.get("affinity", {}).get("podAntiAffinity") or {}).values():
            for term in terms:
                term = term.get("podAffinityTerm", term)
                labels = term.get("labelSelector", {}).get("matchLabels", {})
                if kind == "Deployment" and labels.get("app.kubernetes.io/component") != name.removeprefix("dialectic-"):
                    fail(f"{label}: {name}: anti-affinity selects {labels}, not its own component's pods")
        if kind == "Deployment" and anti["mode"] and not pod.get("affinity", {}).get("podAntiAffinity"):
            fail(f"{label}: {name}: podAntiAffinity.mode {anti['mode']} but no anti-affinity")
    if label == "production" and not rendered:
        fail("production: the production values name a PriorityClass but create none")


# Who calls whom inside the release, by the setting that names the callee.
INTERNAL_URLS = {
    "gateway": {"DIALECTIC_GATEWAY__PLANNER_URL": "planner", "DIALECTIC_GATEWAY__WALLET_URL": "wallet",
                "DIALECTIC_GATEWAY__INDEXER_URL": "indexer", "DIALECTIC_GATEWAY__EXECUTOR_URL": "executor"},
    "executor": {"DIALECTIC_EXECUTOR__WALLET_URL": "wallet", "DIALECTIC_EXECUTOR__INDEXER_URL": "indexer"},
}


def check_internal_urls(by, label, values):
    """Internal clients balance per call over every replica, so each internal
    URL names a headless Service of the release (clusterIP None, ready pods
    only) selecting exactly the callee's pods, on the port the callee's
    container listens on (clients dial the pods, no proxy maps the port); and
    the callee's NetworkPolicy admits the caller on it."""
    for caller, urls in INTERNAL_URLS.items():
        dep = by.get(("Deployment", f"dialectic-{caller}"))
        if not dep:
            continue
        caller_labels = dep["spec"]["template"]["metadata"]["labels"]
        env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        for var, callee in urls.items():
            if callee not in enabled_services(values):
                continue   # runs elsewhere, or not at all: nothing of the release to check against
            url = urllib.parse.urlsplit(env.get(var) or "")
            target = by.get(("Deployment", f"dialectic-{callee}"))
            svc = by.get(("Service", url.hostname or ""))
            if url.scheme != "http" or not url.port or not target:
                fail(f"{label}: {caller}: {var} is {env.get(var)!r}, not http://SERVICE:PORT of the {callee}")
                continue
            if not svc:
                fail(f"{label}: {caller}: {var} names {url.hostname}, which the release does not render")
                continue
            spec = svc["spec"]
            if spec.get("clusterIP") != "None" or spec.get("publishNotReadyAddresses", False):
                fail(f"{label}: {caller}: {var} names Service {url.hostname}, which is not headless over ready pods "
                     f"(clusterIP {spec.get('clusterIP')!r}, publishNotReadyAddresses {spec.get('publishNotReadyAddresses')})")
            if spec.get("selector") != target["spec"]["selector"]["matchLabels"]:
                fail(f"{label}: {caller}: Service {url.hostname} selects {spec.get('selector')}, not the {callee} pods")
            container = target["spec"]["template"]["spec"]["containers"][0]
            listening = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
            ports = [p for p in spec.get("ports", []) if p["port"] == url.port]
            if not ports or listening.get(ports[0].get("targetPort")) != url.port and ports[0].get("targetPort") != url.port:
                fail(f"{label}: {caller}: {var} port {url.port} is not a port of {url.hostname} that the {callee} "
                     f"container listens on ({listening})")
            if values["networkPolicy"]["enabled"] and not admits(by.get(("NetworkPolicy", f"dialectic-{callee}")),
                                                                 caller_labels, listening, url.port):
                fail(f"{label}: the {callee}'s NetworkPolicy does not admit the {caller} on port {url.port}")


def admits(policy, labels, named_ports, port):
    """Whether an ingress NetworkPolicy lets a pod of the same namespace with
    `labels` reach `port` (named_ports: the target container's port names)."""
    if not policy:
        return False
    for rule in policy["spec"].get("ingress", []):
        rule_ports = [named_ports.get(p.get("port"), p.get("port")) for p in rule.get("ports", [])]
        if rule_ports and port not in rule_ports:
            continue
        peers = rule.get("from")
        if peers is None or any(
                "podSelector" in p and "namespaceSelector" not in p
                and all(labels.get(k) == v for k, v in p["podSelector"].get("matchLabels", {}).items())
                for p in peers):
            return True
    return False


def check_tests(by, label, values):
    """`helm test`: a test hook asks every service's health through its Service
    (and the called ones through the headless Services their callers use), on
    ports the Services have, from a pod the NetworkPolicies admit; with an API
    key Secret, a second one runs a session on the simulated model through the
    gateway with the platform's own CLI."""
    tests = values["tests"]
    pods = {name: doc for (kind, name), doc in by.items()
            if doc["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"}
    want = set()
    if tests["enabled"]:
        want.add("dialectic-test-health")
        if tests["session"]["apiKeySecret"]:
            want.add("dialectic-test-session")
    if set(pods) != want:
        fail(f"{label}: test hooks {sorted(pods)}, expected {sorted(want)}")
    health = pods.get("dialectic-test-health")
    if health:
        script = health["spec"]["containers"][0]["args"][-1]
        tls = bool(values["gateway"]["tls"]["secretName"])
        enabled = enabled_services(values)
        urls = [f"{'https' if svc == 'gateway' and tls else 'http'}://dialectic-{svc}:{values['services'][svc]['port']}"
                for svc in enabled]
        urls += sorted({env["value"] for caller in INTERNAL_URLS if caller in enabled
                        for env in by[("Deployment", f"dialectic-{caller}")]["spec"]["template"]["spec"]["containers"][0]["env"]
                        if env["name"] in INTERNAL_URLS[caller] and INTERNAL_URLS[caller][env["name"]] in enabled})
        for svc in set(SERVICES) - set(enabled):
            if f"//dialectic-{svc}" in script:
                fail(f"{label}: the health test checks the {svc}, which services.{svc}.enabled turns off")
        for url in urls:
            parts = urllib.parse.urlsplit(url)
            svc = by.get(("Service", parts.hostname))
            line = next((l for l in script.splitlines() if f" {url} " in l), None)
            # Plaintext: HTTP/2 without upgrade (h2c). TLS: ALPN h2, and the
            # health matters here, not whether the certificate names the Service.
            options = ["--http2", "--insecure"] if parts.scheme == "https" else ["--http2-prior-knowledge"]
            if not line:
                fail(f"{label}: the health test does not check {url}")
            elif line.split(f" {url} ")[1].split() != options:
                fail(f"{label}: the health test calls {url} with {line.split(f' {url} ')[1]!r}, not {' '.join(options)}")
            elif not svc or parts.port not in [p["port"] for p in svc["spec"]["ports"]]:
                fail(f"{label}: the health test checks {url}, which no Service of the release serves")
        if "00000000020801" not in script or "/grpc.health.v1.Health/Check" not in script:
            fail(f"{label}: the health test does not require grpc.health.v1 SERVING")
    for name, pod in pods.items():
        if pod["kind"] != "Pod" or pod["spec"].get("restartPolicy") != "Never":
            fail(f"{label}: test {name} is not a Pod that runs once")
        labels = pod["metadata"]["labels"]
        if values["networkPolicy"]["enabled"]:
            check_closed_policy(by, label, name, labels)
            for svc in enabled_services(values):
                dep = by[("Deployment", f"dialectic-{svc}")]
                c = dep["spec"]["template"]["spec"]["containers"][0]
                named = {p["name"]: p["containerPort"] for p in c["ports"]}
                if not admits(by.get(("NetworkPolicy", f"dialectic-{svc}")), labels, named, named["grpc"]):
                    fail(f"{label}: the {svc}'s NetworkPolicy does not admit the test pod {name}")
    session = pods.get("dialectic-test-session")
    if session:
        cfg = tests["session"]
        weight = lambda p: int(p["metadata"]["annotations"].get("helm.sh/hook-weight", "0"))
        if health and weight(session) <= weight(health):
            fail(f"{label}: the session test does not run after the health test")
        c = session["spec"]["containers"][0]
        args = c.get("args", [])
        image = by[("Deployment", "dialectic-gateway")]["spec"]["template"]["spec"]["containers"][0]["image"]
        gateway = cfg["gatewayUrl"] or f"http://dialectic-gateway:{values['services']['gateway']['port']}"
        if c["image"] != image or c.get("command") != ["/usr/local/bin/dialectic"]:
            fail(f"{label}: the session test does not run the image's dialectic CLI ({c['image']}, {c.get('command')})")
        flag = lambda name: args[args.index(name) + 1] if name in args[:-1] else None
        if "run" not in args or flag("--model") != "simulated":
            fail(f"{label}: the session test does not run a session on the simulated model: {args}")
        if flag("--gateway") != gateway:
            fail(f"{label}: the session test does not call the gateway at {gateway}: {args}")
        env = {e["name"]: e for e in c.get("env", [])}
        ref = env.get("DIALECTIC_API_KEY", {}).get("valueFrom", {}).get("secretKeyRef", {})
        if ref != {"name": cfg["apiKeySecret"], "key": "DIALECTIC_API_KEY"}:
            fail(f"{label}: the session test's API key comes from {ref}, not {cfg['apiKeySecret']}/DIALECTIC_API_KEY")
        if cfg["caSecret"]:
            volumes = {v["name"]: v for v in session["spec"].get("volumes", [])}
            mounts = [m for m in c.get("volumeMounts", [])
                      if volumes.get(m["name"], {}).get("secret", {}).get("secretName") == cfg["caSecret"]]
            ca = env.get("DIALECTIC_CA_CERT", {}).get("value", "")
            if not mounts or not ca.startswith(mounts[0]["mountPath"].rstrip("/") + "/"):
                fail(f"{label}: the session test does not trust the CA in {cfg['caSecret']} (DIALECTIC_CA_CERT {ca!r})")


def check_gateway_tls(by, label, values):
    """gateway.tls.secretName: the Secret's files are the gateway's TLS settings,
    and the probes, which cannot speak TLS, ask the plaintext health port."""
    dep = by.get(("Deployment", "dialectic-gateway"))
    if not dep:
        return
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    probes = [c[p]["grpc"]["port"] for p in ("livenessProbe", "readinessProbe", "startupProbe")]
    svc = by[("Service", "dialectic-gateway")]
    tls = values["gateway"]["tls"]
    if not tls["secretName"]:
        if any(k.startswith("DIALECTIC_GATEWAY__TLS_") for k in env):
            fail(f"{label}: the gateway has TLS settings without gateway.tls.secretName")
        if probes != [values["services"]["gateway"]["port"]] * 3:
            fail(f"{label}: gateway probes on ports {probes}, not its gRPC port")
        return
    mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    secret = volumes.get("gateway-tls", {}).get("secret", {}).get("secretName")
    if secret != tls["secretName"]:
        fail(f"{label}: the gateway mounts TLS Secret {secret!r}, values say {tls['secretName']!r}")
    directory = mounts.get("gateway-tls", "<none>")
    for key, name in [("DIALECTIC_GATEWAY__TLS_CERT", "tls.crt"), ("DIALECTIC_GATEWAY__TLS_KEY", "tls.key")]:
        if env.get(key) != f"{directory}/{name}":
            fail(f"{label}: {key} is {env.get(key)!r}, not the mounted {directory}/{name}")
    if probes != [tls["healthPort"]] * 3 or env.get("DIALECTIC_GATEWAY__HEALTH_LISTEN") != f"0.0.0.0:{tls['healthPort']}":
        fail(f"{label}: with TLS the gateway's probes ({probes}) must ask the plaintext health port "
             f"{tls['healthPort']} (DIALECTIC_GATEWAY__HEALTH_LISTEN {env.get('DIALECTIC_GATEWAY__HEALTH_LISTEN')!r})")
    if any(p.get("appProtocol") == "kubernetes.io/h2c" for p in svc["spec"]["ports"]):
        fail(f"{label}: the gateway's Service says h2c for a TLS port")
    ingress = by.get(("Ingress", "dialectic-gateway"))
    backend = (ingress or {}).get("metadata", {}).get("annotations", {}).get(
        "nginx.ingress.kubernetes.io/backend-protocol")
    if backend == "GRPC":
        fail(f"{label}: the Ingress speaks plaintext gRPC to a gateway serving TLS")


def check_gateway_policy(by, label, values):
    """The gateway admits its ingress controller by selectors, not by an ipBlock alone."""
    np = values["networkPolicy"]
    if not np["enabled"]:
        return
    peers = [peer for rule in by[("NetworkPolicy", "dialectic-gateway")]["spec"]["ingress"]
             for peer in rule.get("from", [])]
    selectors = [p for p in peers if "ipBlock" not in p and "namespaceSelector" in p]
    if not selectors:
        fail(f"{label}: the gateway's NetworkPolicy admits other namespaces only by ipBlock: {peers}")
    if np.get("ingressController") and np["ingressController"] not in peers:
        fail(f"{label}: the gateway's NetworkPolicy does not admit the ingress controller {np['ingressController']}")
    open_ = any(p.get("ipBlock", {}).get("cidr") == "0.0.0.0/0" for p in peers)
    if open_ != bool(np["gatewayOpen"] and not np["gatewayFrom"]):
        fail(f"{label}: the gateway is {'open' if open_ else 'closed'} to every address, against gatewayOpen/gatewayFrom")


def check_migrate_extensions(job, label, values):
    """The migrate Job takes the Deployments' extension points."""
    m = values["migrations"]
    tpl = job["spec"]["template"]
    pod = tpl["spec"]
    c = pod["containers"][0]
    want = {
        "podAnnotations": all(tpl["metadata"].get("annotations", {}).get(k) == v for k, v in m["podAnnotations"].items()),
        "podLabels": all(tpl["metadata"]["labels"].get(k) == v for k, v in m["podLabels"].items()),
        "nodeSelector": all(pod.get("nodeSelector", {}).get(k) == v for k, v in m["nodeSelector"].items()),
        "tolerations": not m["tolerations"] or pod.get("tolerations") == m["tolerations"],
        "affinity": not m["affinity"] or pod.get("affinity") == m["affinity"],
        "extraEnv": all({"name": k, "value": str(v)} in c["env"] for k, v in m["extraEnv"].items()),
        "extraEnvFrom": all(e in c.get("envFrom", []) for e in m["extraEnvFrom"]),
        "extraVolumes": all(v in pod.get("volumes", []) for v in m["extraVolumes"]),
        "extraVolumeMounts": all(v in c.get("volumeMounts", []) for v in m["extraVolumeMounts"]),
    }
    for key, ok in want.items():
        if not ok:
            fail(f"{label}: the migrate Job ignores migrations.{key}")


def check_secrets(by, label, values):
    """Service identity comes from exactly one place (never a render-time random
    value): per-service keys from an existing Secret or the create-if-absent hook
    Job; or, with them off, the shared internal secret from values, an existing
    Secret, or its own create-if-absent hook Job."""
    internal = values["internal"]
    keys = internal["serviceKeys"]
    rendered = by.get(("Secret", "dialectic-internal"))
    internal_job = by.get(("Job", "dialectic-internal-secret"))
    keys_job = by.get(("Job", "dialectic-service-keys"))
    if keys["enabled"]:
        want = (False, False, not keys["existingSecret"])
    elif internal["existingSecret"]:
        want = (False, False, False)
    elif internal["tokenSecret"]:
        want = (True, False, False)
    else:
        want = (False, True, False)
    got = (bool(rendered), bool(internal_job), bool(keys_job))
    if got != want:
        fail(f"{label}: service identity: (internal Secret, internal-secret Job, service-keys Job) "
             f"rendered {got}, expected {want}")
    if internal_job:
        check_secret_hook(by, label, "internal-secret", "dialectic-internal", values)
    if keys_job:
        check_secret_hook(by, label, "service-keys", "dialectic-service-keys", values)


HOOK_RBAC = ("ServiceAccount", "Role", "RoleBinding")


def check_secret_hook(by, label, component, secret, values):
    """A create-if-absent Secret hook: a pre-install/pre-upgrade Job whose own
    ServiceAccount may create Secrets and nothing else (it cannot read one), set
    up before the Job runs, gone after a failed run too, and which serves
    nothing. The Job runs the chart's own image, `dialecticd secret-hook KIND`,
    which draws the values and posts them itself: no third-party image sees a
    key, and no key is on a command line (check_command_lines)."""
    name = f"dialectic-{component}"
    job = by[("Job", name)]
    parts = {kind: by.get((kind, name)) for kind in HOOK_RBAC}
    for kind, doc in parts.items():
        if not doc:
            fail(f"{label}: the {component} Job has no {kind} {name}")
            return
    weight = lambda doc: int(doc["metadata"]["annotations"].get("helm.sh/hook-weight", "0"))
    policy = lambda doc: doc["metadata"].get("annotations", {}).get("helm.sh/hook-delete-policy", "").split(",")
    for kind, doc in [("Job", job), *parts.items()]:
        hook = doc["metadata"].get("annotations", {}).get("helm.sh/hook")
        if hook != "pre-install,pre-upgrade":
            fail(f"{label}: {kind}/{name} is hook {hook}, not pre-install,pre-upgrade")
        if kind != "Job" and weight(doc) >= weight(job):
            fail(f"{label}: {kind}/{name} (hook weight {weight(doc)}) is not in place before its Job ({weight(job)})")
        # A failed run must not leave a grant to create Secrets behind.
        want = {"before-hook-creation", "hook-succeeded"} | ({"hook-failed"} if kind != "Job" else set())
        if not want <= set(policy(doc)):
            fail(f"{label}: {kind}/{name} hook-delete-policy {','.join(policy(doc))} lacks "
                 f"{','.join(sorted(want - set(policy(doc))))}")
    if parts["Role"]["rules"] != [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]:
        fail(f"{label}: the {component} Job's Role should allow creating Secrets and nothing else")
    binding = parts["RoleBinding"]
    if binding["roleRef"]["name"] != name or binding["subjects"] != [
            {"kind": "ServiceAccount", "name": name, "namespace": "dialectic"}]:
        fail(f"{label}: RoleBinding/{name} does not bind its Role to its ServiceAccount")
    if parts["ServiceAccount"].get("automountServiceAccountToken") is not False:
        fail(f"{label}: ServiceAccount/{name} mounts a token into every pod")
    pod = job["spec"]["template"]["spec"]
    if pod.get("serviceAccountName") != name:
        fail(f"{label}: the {component} Job runs as {pod.get('serviceAccountName')}, not {name}")
    # The chart's own image, or one pinned by digest; nothing else sees the keys.
    image = by[("Deployment", "dialectic-gateway")]["spec"]["template"]["spec"]["containers"][0]["image"]
    for c in pod.get("initContainers", []) + pod["containers"]:
        if c["image"] != image and "@sha256:" not in c["image"]:
            fail(f"{label}: the {component} Job runs {c['image']} ({c['name']}), neither the chart's image "
                 f"{image} nor pinned by digest")
    create = pod["containers"][0]
    if create["image"] != image or create.get("command") or create.get("args") != ["secret-hook", component]:
        fail(f"{label}: the {component} Job does not run `dialecticd secret-hook {component}` from {image}: "
             f"{create.get('command')} {create.get('args')}")
    env = {e["name"]: e.get("value") for e in create.get("env", [])}
    if env.get("SECRET_NAME") != secret or env.get("NAMESPACE") != "dialectic":
        fail(f"{label}: the {component} Job creates {env.get('NAMESPACE')}/{env.get('SECRET_NAME')}, not dialectic/{secret}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in create.get("volumeMounts", [])}
    api = volumes.get(mounts.get("/var/run/secrets/kubernetes.io/serviceaccount"), {})
    sources = api.get("projected", {}).get("sources", [])
    if not any("serviceAccountToken" in src for src in sources) or not any(
            i.get("path") == "ca.crt" for src in sources for i in src.get("configMap", {}).get("items", [])):
        fail(f"{label}: the {component} Job has no token and CA where dialecticd reads them")
    if values["networkPolicy"]["enabled"]:
        check_closed_policy(by, label, name, job["spec"]["template"]["metadata"]["labels"])


# Shell phrases that put a value read from a file or a variable on a command
# line: curl's --data "$body" (--data @FILE or @- reads a file or stdin: no
# argument), or a command substitution reading a key.
ARGV_LEAKS = [re.compile(p) for p in [
    r"--data(-\w+)?[ =](?!@)", r"(^|\s)-d\s+[\"']?\$", r"\$\(cat\s", r"\$\(base64", r"\.key\b", r"/dev/urandom",
]]
# A long run of hex or base64: a key, not a name.
KEYLIKE = re.compile(r"[A-Za-z0-9+/=_-]{40,}")


def secret_values(values, path=""):
    """Every string in values under a key that holds a secret."""
    found = []
    if isinstance(values, dict):
        for k, v in values.items():
            here = f"{path}.{k}" if path else k
            if isinstance(v, (dict, list)):
                found += secret_values(v, here)
            elif isinstance(v, str) and len(v) >= 6 and (
                    here.startswith("modelKeys.values.") or here == "internal.tokenSecret"
                    or (here.startswith("secrets.") and here != "secrets.existingSecret")):
                found.append((here, v))
    return found


def check_command_lines(docs, label, values):
    """No key material on any container's command line: /proc/*/cmdline is
    readable by every process of the node that may list processes. Neither a
    value the chart holds as a secret, nor a run of key-like characters, nor a
    shell that passes what it reads from a file or variable to a command's
    arguments."""
    secrets = secret_values(values)
    for doc in docs:
        spec = doc.get("spec", {})
        pod = spec.get("template", {}).get("spec", spec) if doc["kind"] != "Pod" else spec
        for c in pod.get("initContainers", []) + pod.get("containers", []):
            argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
            where = f"{doc['kind']}/{doc['metadata']['name']} ({c['name']})"
            text = "\n".join(argv)
            for name, value in secrets:
                if value in text:
                    fail(f"{label}: {where} has {name} on its command line")
            for pattern in ARGV_LEAKS:
                if pattern.search(text):
                    fail(f"{label}: {where} passes data to a command line ({pattern.pattern}): "
                         f"{text[:120]!r}")
            for arg in argv:
                if KEYLIKE.fullmatch(arg):
                    fail(f"{label}: {where} has a key-like argument ({len(arg)} characters)")


def check_closed_policy(by, label, name, pod_labels):
    """A pod that serves nothing gets a NetworkPolicy admitting nothing."""
    policy = by.get(("NetworkPolicy", name))
    selector = (policy or {}).get("spec", {}).get("podSelector", {}).get("matchLabels", {})
    if not policy or not selector or any(pod_labels.get(k) != v for k, v in selector.items()):
        fail(f"{label}: no NetworkPolicy {name} selects the {name} pods")
    elif policy["spec"].get("policyTypes") != ["Ingress"] or policy["spec"].get("ingress"):
        fail(f"{label}: NetworkPolicy/{name} admits traffic to pods that serve nothing")


def check_service_identity(pod, svc, label, values):
    """Per-service keys: the Deployment mounts its own .key and every .pub from
    the keys Secret, read-only, and points DIALECTIC_INTERNAL__KEY_DIR at them;
    by no route (volume, envFrom, env) can it read another service's .key. With
    them off, the shared internal secret reaches it through envFrom."""
    internal = values["internal"]
    keys = internal["serviceKeys"]
    keys_secret = keys["existingSecret"] or "dialectic-service-keys"
    internal_secret = internal["existingSecret"] or "dialectic-internal"
    containers = pod.get("initContainers", []) + pod["containers"]
    readable = set()   # keys of the keys Secret this pod can read; "*": all of them
    key_volumes = []
    for v in pod.get("volumes", []):
        sources = [(v["secret"].get("secretName"), v["secret"].get("items"))] if "secret" in v else []
        sources += [(src["secret"].get("name"), src["secret"].get("items"))
                    for src in v.get("projected", {}).get("sources", []) if "secret" in src]
        for name, items in sources:
            if name == keys_secret:
                key_volumes.append(v)
                readable |= {i["key"] for i in items} if items else {"*"}
    for c in containers:
        if any(e.get("secretRef", {}).get("name") == keys_secret for e in c.get("envFrom", [])):
            readable.add("*")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("secretKeyRef", {})
            if ref.get("name") == keys_secret:
                readable.add(ref.get("key"))
    others = {f"{s}.key" for s in SERVICES if s != svc}
    if "*" in readable or readable & others:
        fail(f"{label}: {svc} can read another service's private key from {keys_secret}: "
             f"{sorted(readable & others) or 'the whole Secret'}")
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    env_from = [e.get("secretRef", {}).get("name") for e in c.get("envFrom", [])]
    if not keys["enabled"]:
        if "DIALECTIC_INTERNAL__KEY_DIR" in env or key_volumes:
            fail(f"{label}: {svc}: per-service keys are off, but it mounts them or sets DIALECTIC_INTERNAL__KEY_DIR")
        if internal_secret not in env_from:
            fail(f"{label}: {svc}: no service identity secret in envFrom: {env_from}")
        return
    if internal_secret in env_from:
        fail(f"{label}: {svc}: with per-service keys it still reads the shared token secret {internal_secret}")
    if len(key_volumes) != 1:
        fail(f"{label}: {svc}: {len(key_volumes)} volumes of the keys Secret {keys_secret}, expected one")
        return
    vol = key_volumes[0]
    items = vol.get("secret", {}).get("items", [])
    want = {f"{svc}.key"} | {f"{s}.pub" for s in SERVICES}
    if {i["key"] for i in items} != want or len(items) != len(want) or any(i["path"] != i["key"] for i in items):
        fail(f"{label}: {svc}: mounts {[(i['key'], i['path']) for i in items]} of {keys_secret}, "
             f"expected its own .key and every .pub under their names")
    if vol.get("secret", {}).get("defaultMode") != 0o440:
        fail(f"{label}: {svc}: the key files have mode {vol.get('secret', {}).get('defaultMode')}, not 0440")
    mounts = [m for m in c.get("volumeMounts", []) if m["name"] == vol["name"]]
    if len(mounts) != 1 or not mounts[0].get("readOnly") or mounts[0].get("subPath"):
        fail(f"{label}: {svc}: the keys volume is not mounted once, read-only, as a directory: {mounts}")
    elif env.get("DIALECTIC_INTERNAL__KEY_DIR") != mounts[0]["mountPath"]:
        fail(f"{label}: {svc}: DIALECTIC_INTERNAL__KEY_DIR is {env.get('DIALECTIC_INTERNAL__KEY_DIR')!r}, "
             f"not the mounted {mounts[0]['mountPath']}")


def check_shutdown(pod, container, svc, label, values):
    """The preStop hook stops new work first; the grace covers the drain and the hand-back."""
    cfg = values["services"][svc]
    command = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    if command[:2] != ["/usr/local/bin/dialecticd", "drain"]:
        fail(f"{label}: {svc}: preStop hook is {command}, not `dialecticd drain`")
    env = {e["name"]: e.get("value") for e in container["env"]}
    if env.get("DIALECTIC_SHUTDOWN_GRACE_SECS") != str(cfg["shutdownGraceSeconds"]):
        fail(f"{label}: {svc}: DIALECTIC_SHUTDOWN_GRACE_SECS is {env.get('DIALECTIC_SHUTDOWN_GRACE_SECS')}")
    least = values["preStopDelaySeconds"] + cfg["shutdownGraceSeconds"]
    if pod["terminationGracePeriodSeconds"] <= least:
        fail(f"{label}: {svc}: termination grace {pod['terminationGracePeriodSeconds']} s leaves no time after "
             f"the preStop delay and shutdownGraceSeconds ({least} s)")


def expect_crd_schemas_reject():
    """Each custom resource schema must fail a broken object, or it checks nothing."""
    broken = {
        "ScaledObject": {"spec": {"scaleTargetRef": {"name": "x"},
                                  "triggers": [{"type": "rabbitmq", "metadata": {"value": 8}}]}},
        "TriggerAuthentication": {"spec": {"secretTargetRef": [{"parameter": "host", "name": "s"}]}},
        "ServiceMonitor": {"spec": {"selector": {}, "endpoints": [{"port": "metrics", "interval": "30 seconds"}]}},
        "PrometheusRule": {"spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up", "for": "5 min"}]}]}},
        "GRPCRoute": {"spec": {"rules": [{"backendRefs": [{"name": "gw", "port": 70000}]}]}},
    }
    for (api, kind), validator in CRD_VALIDATORS.items():
        doc = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, **broken[kind]}
        errors = list(validator.iter_errors(doc))
        if errors:
            print(f"ok   {kind} schema rejects a broken object: {errors[0].message}")
        else:
            fail(f"the {kind} schema accepted a broken object")


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


def chart_version():
    return yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]


def chart_digest():
    """sha256 over the chart's files (path and bytes, in path order), but DIGEST_EXCLUDED."""
    h = hashlib.sha256()
    for path in sorted(p for p in CHART.rglob("*") if p.is_file()):
        rel = path.relative_to(CHART).as_posix()
        if rel in DIGEST_EXCLUDED:
            continue
        data = path.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def read_digest_file():
    try:
        fields = yaml.safe_load(DIGEST_FILE.read_text()) or {}
    except FileNotFoundError:
        return None, None
    return str(fields.get("version")), fields.get("sha256")


def update_digest():
    version, digest = chart_version(), chart_digest()
    old_version, old_digest = read_digest_file()
    if old_version == version and old_digest != digest:
        print(f"note: the chart changed and its version is still {version}: right only while "
              f"{version} is unreleased (CHANGELOG.md)")
    DIGEST_FILE.write_text(
        "# The chart's files (sha256 of every file under helm/dialectic but this one and\n"
        "# CHANGELOG.md) as they were when Chart.yaml's version was recorded here. Written by\n"
        "# `deploy/chart-check.sh --update-digest`; chart-check fails when the files change\n"
        "# and the version does not.\n"
        f"version: {version}\nsha256: {digest}\n")
    print(f"recorded chart {version}: sha256 {digest}")


def check_version_bumped():
    """A chart whose files changed is a new chart version (CI runs this on every
    commit, from a fresh clone: the record is a file, not git history)."""
    version, digest = chart_version(), chart_digest()
    recorded_version, recorded_digest = read_digest_file()
    fix = ("bump version in helm/dialectic/Chart.yaml, add its entry to helm/dialectic/CHANGELOG.md, "
           "then run deploy/chart-check.sh --update-digest")
    if recorded_version is None:
        fail(f"helm/dialectic/.chart-digest is missing: {fix}")
    elif recorded_version != version:
        fail(f"Chart.yaml says {version}, helm/dialectic/.chart-digest was recorded at {recorded_version}: "
             f"run deploy/chart-check.sh --update-digest")
    elif recorded_digest != digest:
        fail(f"the chart's files changed since version {version} was recorded: {fix}")
    else:
        print(f"ok   chart files match what version {version} was recorded with")
    if not re.search(rf"^## {re.escape(version)}[ \t]*$", (CHART / "CHANGELOG.md").read_text(), re.M):
        fail(f"helm/dialectic/CHANGELOG.md has no section '## {version}'")


def deprecated_cli_spellings():
    """The flat spellings the CLI keeps, hidden, for one release (services/cli/src/legacy.rs)."""
    text = (ROOT / "services" / "cli" / "src" / "legacy.rs").read_text()
    enum = text[text.index("pub enum Deprecated"):text.index("impl Deprecated")]
    words = {re.sub(r"(?<!^)([A-Z])", r"-\1", v).lower() for v in re.findall(r"^\s+([A-Z]\w*)\b", enum, re.M)}
    return words | set(re.findall(r'alias = "([\w-]+)"', enum))


def check_cli_spellings():
    """What the chart tells operators to type uses the CLI's current commands."""
    old = deprecated_cli_spellings()
    if not {"models", "status", "watch"} <= old:
        fail(f"could not read the deprecated spellings from services/cli/src/legacy.rs: {sorted(old)}")
    # `dialectic`, its global flags (with a value unless one follows at once), then the command.
    call = re.compile(r"(?<![\w./-])(?<!-n )(?<!--namespace )dialectic((?:\s+--?[\w-]+(?:(?:\s+|=)(?!-)\S+)?)*)\s+([a-z][\w-]*)")
    docs = [(f"NOTES.txt ({label} values)", text) for label, text in RENDERED_NOTES.items()]
    docs += [(str(p.relative_to(ROOT)), p.read_text()) for p in [CHART / "README.md", ROOT / "deploy" / "OPERATIONS.md"]]
    stale = [(where, m) for where, text in docs for m in call.finditer(text) if m.group(2) in old]
    for where, m in stale:
        fail(f"{where}: `{' '.join(m.group(0).split())}` is a deprecated spelling")
    if not stale:
        print(f"ok   the rendered NOTES.txt, the chart README and OPERATIONS.md use none of the CLI's "
              f"{len(old)} deprecated spellings")


README = CHART / "README.md"
TABLE_START = "<!-- values table: generated by deploy/chart-check.sh --update-readme from values.schema.json -->"
TABLE_END = "<!-- end of values table -->"
# The extension points: each must be in the schema with a description (so in the table).
DESCRIBED = ["global.imageRegistry", "commonLabels", "commonAnnotations", "extraObjects", "probes",
             "probes.liveness", "services.<name>.enabled", "services.<name>.extraContainers",
             "services.<name>.initContainers", "services.<name>.extraVolumes", "services.<name>.extraVolumeMounts",
             "services.<name>.service.type", "services.<name>.service.annotations",
             "services.<name>.service.loadBalancerIP", "services.<name>.service.loadBalancerSourceRanges",
             "services.<name>.probes", "services.<name>.autoscaling", "gatewayAutoscaling"]


def resolve_ref(schema, node):
    """A property that is a definition ($ref, or allOf with one), as the definition with the property's description."""
    refs = [node["$ref"]] if "$ref" in node else [n["$ref"] for n in node.get("allOf", []) if "$ref" in n]
    if not refs:
        return node
    return {**schema["definitions"][refs[0].rsplit("/", 1)[1]], "description": node.get("description")}


def schema_rows(schema, node, path, defaults):
    """(key, type, default, description) of every described property under node, in schema order."""
    rows = []
    for key, sub in (node.get("properties") or {}).items():
        if path == "services" and key != "gateway":
            continue   # one definition for every service: listed once, as services.<name>
        here = f"{path}.{key}" if path else key
        shown = "services.<name>" if here == "services.gateway" else here
        sub_defaults = [d.get(key) if isinstance(d, dict) else None for d in defaults]
        if path == "services":
            sub_defaults = [d for d in defaults[0].values()]
        target = resolve_ref(schema, sub)
        if target.get("description"):
            kind = target.get("type") or ("enum" if "enum" in target else "")
            kind = " or ".join(kind) if isinstance(kind, list) else kind
            if "enum" in target:
                kind = ", ".join(json.dumps(e) for e in target["enum"])
            values = [json.dumps(d, separators=(", ", ": ")) for d in sub_defaults if d is not None] or [""]
            default = values[0] if len(set(values)) == 1 else "per service: values.yaml"
            if len(default) > 100:
                default = "see values.yaml"
            rows.append((shown, kind, default, " ".join(target["description"].split())))
        if target.get("properties"):
            rows += schema_rows(schema, target, shown if path == "services" else here, sub_defaults)
    return rows


def values_table():
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = load_values("values.yaml")
    rows = schema_rows(schema, schema, "", [defaults])
    cell = lambda s: s.replace("|", "\\|")
    lines = [TABLE_START, "", "| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    lines += [f"| `{k}` | {cell(ty)} | {'`' + d + '`' if d and not d.startswith(('see ', 'per ')) else d} | {cell(desc)} |"
              for k, ty, d, desc in rows]
    return "\n".join(lines + ["", TABLE_END]), {k for k, *_ in rows}


def readme_with_table():
    text = README.read_text()
    table, _ = values_table()
    if TABLE_START not in text or TABLE_END not in text:
        return None, text
    head, rest = text.split(TABLE_START, 1)
    return head + table + rest.split(TABLE_END, 1)[1], text


def check_values_table():
    """The README's values table is the one values.schema.json generates, and every
    extension point is in it."""
    _, keys = values_table()
    for key in DESCRIBED:
        if key not in keys:
            fail(f"values.schema.json has no description for {key}, so the values table lacks it")
    want, text = readme_with_table()
    if want is None:
        fail(f"helm/dialectic/README.md has no values table markers ({TABLE_START} … {TABLE_END})")
    elif want != text:
        fail("helm/dialectic/README.md: the values table differs from values.schema.json's: "
             "run deploy/chart-check.sh --update-readme")
    else:
        print(f"ok   the README's values table is generated from values.schema.json ({len(keys)} keys)")


def main():
    if "--update-digest" in OPTIONS or "--update-readme" in OPTIONS:
        if "--update-readme" in OPTIONS:
            want, _ = readme_with_table()
            if want is None:
                sys.exit(f"helm/dialectic/README.md: put the markers where the table goes:\n{TABLE_START}\n{TABLE_END}")
            README.write_text(want)
            print("wrote the values table into helm/dialectic/README.md")
        if "--update-digest" in OPTIONS:
            update_digest()
        return
    check_version_bumped()
    check_values_table()
    chart = helm.Chart.load(str(CHART))
    defaults = load_values("values.yaml")
    prod = load_values("values-production.yaml")
    merged_prod = chart.merge_values(prod)
    eks = helm_merge(prod, load_values("values-eks.yaml"))
    quickstart = load_values("values-quickstart.yaml")
    quickstart_mirror = helm_merge(quickstart, {"global": {"imageRegistry": REGISTRY}, **COMMON})

    for label, values in [("default", None), ("production", prod), ("quickstart", quickstart)]:
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
        ("derived-keys", derived_keys(), chart.merge_values(derived_keys())),
        ("some-disabled", some_disabled(), chart.merge_values(some_disabled())),
        ("eks", eks, chart.merge_values(eks)),
        ("quickstart", quickstart, chart.merge_values(quickstart)),
        ("quickstart-mirror", quickstart_mirror, chart.merge_values(quickstart_mirror)),
    ]:
        docs = render(chart, values, label)
        kinds = validate(docs, label)
        check_shape(docs, label, full)
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"ok   {label}: {len(docs)} manifests validated against k8s {' and '.join(KUBE_VERSIONS)}: {summary}")

    check_templates_stateless()
    check_cli_spellings()
    wrong = copy.deepcopy(defaults)
    wrong["services"]["gateway"]["replicas"] = "two"
    expect_rejected(chart, {"services": wrong["services"]}, "a string for services.gateway.replicas")
    expect_rejected(chart, {"metrics": {"port": 70000}}, "metrics.port 70000")
    expect_rejected(chart, {"image": {"pullPolicy": "Sometimes"}}, "image.pullPolicy Sometimes")
    expect_rejected(chart, {"keda": {"enabled": "yes"}}, "a string for keda.enabled")
    expect_rejected(chart, {"servcies": {}}, "an unknown top-level key (typo)")
    expect_rejected(chart, {"secrets": {"databaseUrl": ""}}, "no database URL and no existing Secret")
    expect_rejected(chart, {"image": {"digest": "latest"}}, "a digest that is not sha256")
    expect_rejected(chart, {"services": {"executor": {"shutdownGraceSeconds": "long"}}},
                    "a string for services.executor.shutdownGraceSeconds")
    expect_rejected(chart, {"modelKeys": {"services": ["scheduler"]}}, "modelKeys for an unknown service")
    expect_rejected(chart, {"internal": {"tokenSecret": "short"}}, "an internal tokenSecret shorter than 32 characters")
    expect_rejected(chart, {"podAntiAffinity": {"mode": "always"}}, "podAntiAffinity.mode always")
    expect_rejected(chart, {"internal": {"serviceKeys": {"enabled": "yes"}}}, "a string for internal.serviceKeys.enabled")
    expect_rejected(chart, {"internal": {"serviceKeys": {"secretName": "k"}}}, "an unknown key under internal.serviceKeys")
    expect_rejected(chart, {"gateway": {"tls": {"healthPort": "7050"}}}, "a string for gateway.tls.healthPort")
    expect_rejected(chart, {"gateway": {"tls": {"secretName": "gw-tls"}}, "tests": {"session": {"apiKeySecret": "k"}}},
                    "a session test against a TLS gateway without an https:// tests.session.gatewayUrl")
    expect_rejected(chart, {"tests": {"session": {"timeoutSeconds": "5m"}}}, "a string for tests.session.timeoutSeconds")
    model = {"name": "m", "provider": "openai", "context_window": 8, "max_output": 4}
    expect_rejected(chart, {"models": [{**model, "api_key": "sk-live-0123456789"}]}, "a model key inline (api_key)")
    expect_rejected(chart, {"models": [{**model, "key_env": "sk-live-0123456789"}]}, "a key in place of key_env's variable name")
    expect_rejected(chart, {"models": [{"name": "m", "provider": "openai"}]}, "a model without its context window")
    expect_rejected(chart, {"bootstrap": {"credits": [{"amount": 0}]}}, "a bootstrap credit of 0 tokens")
    expect_rejected(chart, {"bootstrap": {"adminKeySecret": {"name": "k", "value": "dlk_" + "0" * 32}}},
                    "an administrator key inline in values")
    expect_rejected(chart, {"bootstrap": {"credits": [{"user": "me", "amount": 5}]}}, "a bootstrap credit's user not a UUID")
    expect_rejected(chart, {"services": {"gateway": {"autoscaling": {"enabled": True}}}},
                    "services.gateway.autoscaling (the gateway's HPA is gatewayAutoscaling)")
    expect_rejected(chart, {"commonLabels": {"app.kubernetes.io/name": "x"}}, "a commonLabels key the chart sets itself")
    expect_rejected(chart, {"services": {"wallet": {"service": {"type": "External"}}}}, "Service type External")
    expect_rejected(chart, {"probes": {"liveness": {"timeout": 3}}}, "an unknown probe field")
    expect_rejected(chart, {"global": {"imageRegistry": "https://mirror.example.com"}}, "a URL for global.imageRegistry")
    expect_rejected(chart, {"services": {"executor": {"extraContainers": [{"name": "x"}]}}}, "an extra container without an image")
    try:
        chart.render({"keda": {"enabled": True}, "services": {"executor": {"autoscaling": {"enabled": True}}}},
                     name="dialectic", namespace="dialectic", is_install=True)
        fail("render accepted KEDA and an HPA for the executor at once")
    except helm.HelmError as e:
        print(f"ok   render refuses KEDA and an HPA for the same service: {' '.join(str(e).split())[:120]}")
    expect_crd_schemas_reject()

    if failures:
        print(f"{len(failures)} chart check(s) failed")
        sys.exit(1)
    print("chart checks passed")


if __name__ == "__main__":
    main()
