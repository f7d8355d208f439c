"""Reduced JSON schemas for the operators' custom resources, which kubernetes-validate lacks.

Written from the CRDs' documented fields: CloudNativePG `Cluster`, Altinity
`ClickHouseInstallation` and `ClickHouseKeeperInstallation`. The fields mcpd sets are typed; an
unknown field (a typo) is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_QUANTITY: dict[str, Any] = {
    "type": ["string", "integer", "number"],
    "pattern": r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$",
}
_DNS_LABEL: dict[str, Any] = {
    "type": "string",
    "maxLength": 63,
    "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_METADATA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": _DNS_LABEL,
        "namespace": _DNS_LABEL,
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
}
_RESOURCES: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "requests": {"type": "object", "additionalProperties": _QUANTITY},
        "limits": {"type": "object", "additionalProperties": _QUANTITY},
    },
}
_SECRET_KEY_REF: dict[str, Any] = {
    "type": "object",
    "required": ["valueFrom"],
    "additionalProperties": False,
    "properties": {
        "valueFrom": {
            "type": "object",
            "required": ["secretKeyRef"],
            "additionalProperties": False,
            "properties": {
                "secretKeyRef": {
                    "type": "object",
                    "required": ["name", "key"],
                    "additionalProperties": False,
                    "properties": {"name": _DNS_LABEL, "key": {"type": "string"}},
                }
            },
        }
    },
}
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


def _named_templates(spec_required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["name", *spec_required],
            "properties": {"name": {"type": "string", "minLength": 1}},
        },
    }


def _custom_resource(api_version: str, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": api_version},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": dict(spec),
        },
    }


_CNPG_STORAGE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "anyOf": [{"required": ["size"]}, {"required": ["pvcTemplate"]}],
    "properties": {
        "size": {"type": "string", "pattern": _QUANTITY["pattern"]},
        "storageClass": {"type": "string"},
        "resizeInUseVolumes": {"type": "boolean"},
        "pvcTemplate": _ANY_OBJECT,
    },
}

# CloudNativePG ClusterSpec (postgresql.cnpg.io/v1): the fields mcpd sets are typed; every other
# documented top-level field is accepted as it is, and an unknown one (a typo) is an error.
_CNPG_OTHER_FIELDS = [
    "affinity",
    "backup",
    "certificates",
    "enableSuperuserAccess",
    "env",
    "envFrom",
    "ephemeralVolumeSource",
    "ephemeralVolumesSizeLimit",
    "externalClusters",
    "failoverDelay",
    "imageCatalogRef",
    "imagePullPolicy",
    "imagePullSecrets",
    "inheritedMetadata",
    "livenessProbeTimeout",
    "logLevel",
    "managed",
    "maxSyncReplicas",
    "minSyncReplicas",
    "monitoring",
    "nodeMaintenanceWindow",
    "plugins",
    "podSecurityContext",
    "postgresGID",
    "postgresUID",
    "primaryUpdateMethod",
    "primaryUpdateStrategy",
    "priorityClassName",
    "probes",
    "projectedVolumeTemplate",
    "replica",
    "replicationSlots",
    "schedulerName",
    "seccompProfile",
    "securityContext",
    "serviceAccountTemplate",
    "smartShutdownTimeout",
    "startDelay",
    "stopDelay",
    "superuserSecret",
    "switchoverDelay",
    "tablespaces",
    "topologySpreadConstraints",
]

CNPG_CLUSTER_SCHEMA = _custom_resource(
    "postgresql.cnpg.io/v1",
    "Cluster",
    {
        "type": "object",
        "required": ["instances", "storage"],
        "additionalProperties": False,
        "properties": {
            "description": {"type": "string"},
            "imageName": {"type": "string", "minLength": 1},
            "instances": {"type": "integer", "minimum": 1},
            "enablePDB": {"type": "boolean"},
            "bootstrap": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": False,
                "properties": {
                    "initdb": {
                        "type": "object",
                        "dependentRequired": {"database": ["owner"]},
                        "properties": {
                            "database": {"type": "string", "minLength": 1},
                            "owner": {"type": "string", "minLength": 1},
                            "secret": {"type": "object", "required": ["name"]},
                        },
                    },
                    "recovery": _ANY_OBJECT,
                    "pg_basebackup": _ANY_OBJECT,
                },
            },
            "storage": _CNPG_STORAGE,
            "walStorage": _CNPG_STORAGE,
            "postgresql": {
                "type": "object",
                "properties": {
                    # PostgreSQL parameters are strings in the CRD: `max_connections: 200` is
                    # refused by the API server, `"200"` is right.
                    "parameters": {"type": "object", "additionalProperties": {"type": "string"}},
                    "pg_hba": {"type": "array", "items": {"type": "string"}},
                },
            },
            "resources": _RESOURCES,
            **{name: {} for name in _CNPG_OTHER_FIELDS},
        },
    },
)

_CH_TEMPLATES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "podTemplates": _named_templates(["spec"]),
        "volumeClaimTemplates": _named_templates(["spec"]),
        "serviceTemplates": _named_templates(["spec"]),
        "hostTemplates": _named_templates([]),
    },
}
_CH_DEFAULT_TEMPLATES: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"type": "string", "minLength": 1},
}


def _ch_clusters(*, shards: bool) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "type": "object",
        "properties": {"replicasCount": {"type": "integer", "minimum": 1}},
    }
    if shards:
        layout["properties"]["shardsCount"] = {"type": "integer", "minimum": 1}
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-zA-Z0-9-]{1,15}$"},
                "layout": layout,
                "templates": _CH_DEFAULT_TEMPLATES,
            },
        },
    }


_CH_SPEC_COMMON = [
    "taskID",
    "stop",
    "suspend",
    "namespaceDomainPattern",
    "reconciling",
    "reconcile",
    "security",
    "troubleshoot",
    "restart",
    "templating",
    "useTemplates",
]

# Altinity ClickHouseInstallation (clickhouse.altinity.com/v1).
CLICKHOUSE_INSTALLATION_SCHEMA = _custom_resource(
    "clickhouse.altinity.com/v1",
    "ClickHouseInstallation",
    {
        "type": "object",
        "required": ["configuration"],
        "additionalProperties": False,
        "properties": {
            "defaults": {
                "type": "object",
                "properties": {"templates": _CH_DEFAULT_TEMPLATES},
            },
            "configuration": {
                "type": "object",
                "required": ["clusters"],
                "additionalProperties": False,
                "properties": {
                    "zookeeper": {
                        "type": "object",
                        "properties": {
                            "nodes": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "required": ["host"],
                                    "properties": {
                                        "host": {"type": "string", "minLength": 1},
                                        "port": {"type": "integer", "minimum": 1},
                                    },
                                },
                            }
                        },
                    },
                    "users": {
                        "type": "object",
                        "propertyNames": {"pattern": r"^[A-Za-z0-9_]+/.+$"},
                        "additionalProperties": {
                            "anyOf": [
                                {"type": ["string", "number", "boolean"]},
                                {"type": "array", "items": {"type": ["string", "number"]}},
                                _SECRET_KEY_REF,
                            ]
                        },
                    },
                    "profiles": _ANY_OBJECT,
                    "quotas": _ANY_OBJECT,
                    "settings": _ANY_OBJECT,
                    "files": _ANY_OBJECT,
                    "clusters": _ch_clusters(shards=True),
                },
            },
            "templates": _CH_TEMPLATES,
            **{name: {} for name in _CH_SPEC_COMMON},
        },
    },
)

# Altinity ClickHouseKeeperInstallation (clickhouse-keeper.altinity.com/v1).
CLICKHOUSE_KEEPER_SCHEMA = _custom_resource(
    "clickhouse-keeper.altinity.com/v1",
    "ClickHouseKeeperInstallation",
    {
        "type": "object",
        "required": ["configuration"],
        "additionalProperties": False,
        "properties": {
            "defaults": {
                "type": "object",
                "properties": {"templates": _CH_DEFAULT_TEMPLATES},
            },
            "configuration": {
                "type": "object",
                "required": ["clusters"],
                "additionalProperties": False,
                "properties": {
                    "settings": _ANY_OBJECT,
                    "files": _ANY_OBJECT,
                    "clusters": _ch_clusters(shards=False),
                },
            },
            "templates": _CH_TEMPLATES,
            **{name: {} for name in _CH_SPEC_COMMON},
        },
    },
)

CUSTOM_RESOURCE_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("postgresql.cnpg.io/v1", "Cluster"): CNPG_CLUSTER_SCHEMA,
    ("clickhouse.altinity.com/v1", "ClickHouseInstallation"): CLICKHOUSE_INSTALLATION_SCHEMA,
    ("clickhouse-keeper.altinity.com/v1", "ClickHouseKeeperInstallation"): (
        CLICKHOUSE_KEEPER_SCHEMA
    ),
}

# Templates a ClickHouse resource embeds, validated as the Kubernetes object they become.
EMBEDDED_TEMPLATES = {
    "podTemplates": ("v1", "Pod"),
    "volumeClaimTemplates": ("v1", "PersistentVolumeClaim"),
    "serviceTemplates": ("v1", "Service"),
}
