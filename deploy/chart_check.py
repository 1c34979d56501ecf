"""Checks the Helm chart offline (run by deploy/chart-check.sh inside its venv).

1. lint (strict) with the default, production and quickstart values;
2. render with default, production, every-option, derived-keys, EKS and quickstart values (each
   twice: the two renders must be byte-identical) and validate every
   manifest against the Kubernetes OpenAPI schemas (strict: unknown fields fail),
   for the oldest and the newest Kubernetes the chart supports;
3. values.schema.json rejects values of the wrong type, unknown keys and
   missing connection settings — both in schema validation and at render time;
4. writes the rendered manifests for the security scan that follows.
"""

import copy
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
OUT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/dialectic-chart")
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
    })
    return v


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
    for svc in SERVICES:
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
                      or (svc in ("executor", "renderer") and values["keda"]["enabled"]))
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
    for (kind, name), doc in by.items():
        hook = doc["metadata"].get("annotations", {}).get("helm.sh/hook")
        if hook and hook != "test" and kind not in ("Job", "ServiceAccount", "Role", "RoleBinding"):
            fail(f"{label}: {kind}/{name} is a hook")


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
        urls = [f"{'https' if svc == 'gateway' and tls else 'http'}://dialectic-{svc}:{values['services'][svc]['port']}"
                for svc in SERVICES]
        urls += sorted({env["value"] for caller in INTERNAL_URLS
                        for env in by[("Deployment", f"dialectic-{caller}")]["spec"]["template"]["spec"]["containers"][0]["env"]
                        if env["name"] in INTERNAL_URLS[caller]})
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
            for svc in SERVICES:
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


def main():
    chart = helm.Chart.load(str(CHART))
    defaults = load_values("values.yaml")
    prod = load_values("values-production.yaml")
    merged_prod = chart.merge_values(prod)
    eks = helm_merge(prod, load_values("values-eks.yaml"))
    quickstart = load_values("values-quickstart.yaml")

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
        ("eks", eks, chart.merge_values(eks)),
        ("quickstart", quickstart, chart.merge_values(quickstart)),
    ]:
        docs = render(chart, values, label)
        kinds = validate(docs, label)
        check_shape(docs, label, full)
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"ok   {label}: {len(docs)} manifests validated against k8s {' and '.join(KUBE_VERSIONS)}: {summary}")

    check_templates_stateless()
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
    expect_crd_schemas_reject()

    if failures:
        print(f"{len(failures)} chart check(s) failed")
        sys.exit(1)
    print("chart checks passed")


if __name__ == "__main__":
    main()
