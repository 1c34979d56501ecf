{{- /*
A pre-install/pre-upgrade hook that creates a Secret once, when (and only when)
it does not exist yet: a ServiceAccount, a Role that may only create Secrets
(it cannot read one, so an existing Secret is never seen, let alone replaced:
the API answers 409 Conflict and the Job succeeds), its RoleBinding, and the
Job. The Secret it creates is no release resource: it outlives `helm uninstall`,
and it carries no app.kubernetes.io/instance label, so Argo CD (label tracking)
never prunes it. Nothing here is random at render time: the values are drawn
when the Job runs.

Used by internal-secret.yaml (the shared token secret) and service-keys.yaml
(one Ed25519 key pair per service). Parameters (a dict):

  root        the chart's root context
  component   the Job's name suffix and component label (internal-secret, service-keys)
  secretName  the Secret to create
  data        shell lines run first in the create container, setting $data to the
              members of the Secret's data, a JSON object's inside
              ("KEY":"base64",…)
  generate    optional: args for an init container running the chart's own image
              (its entrypoint, dialecticd) before the create step; it writes into
              /work, which the create container reads
*/}}
{{- define "dialectic.secretHook" -}}
{{- $root := .root }}
{{- $job := printf "%s-%s" (include "dialectic.fullname" $root) .component }}
{{- $hook := dict "helm.sh/hook" "pre-install,pre-upgrade" "helm.sh/hook-delete-policy" "before-hook-creation,hook-succeeded" }}
{{- $gen := $root.Values.internal.generator }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-30"
automountServiceAccountToken: false
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-30"
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-30"
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $job }}
subjects:
  - kind: ServiceAccount
    name: {{ $job }}
    namespace: {{ $root.Release.Namespace }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $job }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "dialectic.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    {{- toYaml $hook | nindent 4 }}
    "helm.sh/hook-weight": "-20"
spec:
  backoffLimit: 3
  activeDeadlineSeconds: 300
  template:
    metadata:
      labels:
        {{- include "dialectic.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
      {{- with $gen.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      restartPolicy: Never
      serviceAccountName: {{ $job }}
      # The API token is mounted explicitly below (short-lived, this Job only).
      automountServiceAccountToken: false
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with merge (deepCopy ($gen.nodeSelector | default dict)) ($root.Values.nodeSelector | default dict) }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $gen.tolerations | default $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .generate }}
      initContainers:
        - name: generate
          image: {{ include "dialectic.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: {{ toJson . }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          resources:
            {{- toYaml $gen.resources | nindent 12 }}
          volumeMounts:
            - name: work
              mountPath: /work
      {{- end }}
      containers:
        - name: create
          image: {{ $gen.image | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["/bin/sh", "-c"]
          args:
            - |
              set -eu
              api=/var/run/secrets/dialectic-api
              {{- .data | nindent 14 }}
              body=$(printf '{"apiVersion":"v1","kind":"Secret","type":"Opaque","metadata":{"name":"%s","labels":{"app.kubernetes.io/name":"%s","app.kubernetes.io/part-of":"%s","app.kubernetes.io/component":"%s"}},"data":{%s}}' \
                "$SECRET_NAME" "$CHART_NAME" "$RELEASE_NAME" "$COMPONENT" "$data")
              code=$(curl -sS -o /tmp/reply -w '%{http_code}' --cacert "$api/ca.crt" \
                -H "Authorization: Bearer $(cat "$api/token")" -H 'Content-Type: application/json' \
                --data "$body" "https://kubernetes.default.svc/api/v1/namespaces/$NAMESPACE/secrets")
              case "$code" in
                201) echo "created Secret $SECRET_NAME" ;;
                409) echo "Secret $SECRET_NAME exists; left as it is" ;;
                *) echo "creating Secret $SECRET_NAME: HTTP $code" >&2; cat /tmp/reply >&2; exit 1 ;;
              esac
          env:
            - name: SECRET_NAME
              value: {{ .secretName | quote }}
            - name: COMPONENT
              value: {{ .component | quote }}
            - name: CHART_NAME
              value: {{ include "dialectic.name" $root | quote }}
            - name: RELEASE_NAME
              value: {{ $root.Release.Name | quote }}
            - name: NAMESPACE
              value: {{ $root.Release.Namespace | quote }}
          securityContext:
            {{- toYaml $root.Values.containerSecurityContext | nindent 12 }}
          resources:
            {{- toYaml $gen.resources | nindent 12 }}
          volumeMounts:
            - name: api
              mountPath: /var/run/secrets/dialectic-api
              readOnly: true
            - name: tmp
              mountPath: /tmp
            {{- if .generate }}
            - name: work
              mountPath: /work
              readOnly: true
            {{- end }}
      volumes:
        - name: api
          projected:
            sources:
              - serviceAccountToken:
                  path: token
                  expirationSeconds: 600
              - configMap:
                  name: kube-root-ca.crt
                  items:
                    - key: ca.crt
                      path: ca.crt
        - name: tmp
          emptyDir:
            sizeLimit: 1Mi
        {{- if .generate }}
        # Private keys: memory-backed, gone with the Pod.
        - name: work
          emptyDir:
            medium: Memory
            sizeLimit: 1Mi
        {{- end }}
{{- end -}}
