#!/usr/bin/env python3
"""Writes broker/kafka_broker_configs.go: the names of Kafka's broker
configs (KafkaConfig's AbstractKafkaConfig.CONFIG_DEF), read from Kafka's
source at a tag, without building Kafka: in the classes whose CONFIG_DEF it
merges, the ConfigDef builders (their *CONFIG_DEF initializers, a
configDef() method) are scanned for .define(...) and .defineInternal(...), and
their first arguments resolved through the String constants of Kafka's
Java sources (string literals, concatenation, other constants, static
imports, and ServerTopicConfigSynonyms.serverSynonym, read from that
class's table).

Usage: deploy/scripts/gen-kafka-broker-configs.py KAFKA_GIT_DIR TAG > broker/kafka_broker_configs.go
e.g.   deploy/scripts/gen-kafka-broker-configs.py /work/.mirror/apache+kafka/repo 3.9.0-rc3
"""
import re
import subprocess
import sys

git, tag = sys.argv[1], sys.argv[2]

# The classes AbstractKafkaConfig.CONFIG_DEF merges (Kafka 3.9).
CLASSES = ["RemoteLogManagerConfig", "ZkConfigs", "ServerConfigs", "KRaftConfigs",
           "SocketServerConfigs", "ReplicationConfigs", "GroupCoordinatorConfig",
           "CleanerConfig", "LogConfig", "ShareGroupConfig", "TransactionLogConfigs",
           "TransactionStateManagerConfigs", "QuorumConfig", "MetricConfigs", "QuotaConfigs",
           "BrokerSecurityConfigs", "DelegationTokenManagerConfigs", "PasswordEncoderConfigs"]


def sh(*args):
    return subprocess.run(["git", "-C", git] + list(args), check=True, capture_output=True, text=True).stdout


files = [f for f in sh("ls-tree", "-r", "--name-only", tag).splitlines()
         if f.endswith(".java") and "/src/main/java/" in f]
consts = {}  # "Class.NAME" and "NAME@Class" -> expression text
sources = {}
decl = re.compile(r"(?:public|private|protected)?\s*static\s+final\s+String\s+(\w+)\s*=\s*(.*?);", re.S)
for f in files:
    cls = f.rsplit("/", 1)[1][:-5]
    if not any(k in f for k in ("clients/", "server/", "server-common/", "storage/", "group-coordinator/",
                                "transaction-coordinator/", "raft/", "metadata/")):
        continue
    text = sh("show", f"{tag}:{f}")
    sources[cls] = text
    for m in decl.finditer(text):
        consts.setdefault(f"{cls}.{m.group(1)}", (cls, m.group(2)))
    for m in re.finditer(r"import static [\w.]*\.(\w+)\.(\w+);", text):
        consts.setdefault(f"{cls}.{m.group(2)}", (cls, f"{m.group(1)}.{m.group(2)}"))

# serverSynonym: ServerTopicConfigSynonyms' table, topic config -> its
# first broker synonym.
SYN = {}
syn_src = sources["ServerTopicConfigSynonyms"]
table = syn_src[syn_src.index("ALL_TOPIC_CONFIG_SYNONYMS"):syn_src.index("Map<String, String> TOPIC_CONFIG_SYNONYMS")]
entry = re.compile(r"(sameName|sameNameWithLogPrefix|sameNameWithLogCleanerPrefix|singleWithLogPrefix|"
                   r"singleWithLogCleanerPrefix|listWithLogPrefix|single)\(\s*([\w.]+)\s*(?:,\s*(?:new ConfigSynonym\()?\"([^\"]+)\")?")


def resolve(expr, cls, depth=0):
    if depth > 20:
        raise ValueError(expr)
    out = ""
    for part in split_plus(expr.strip()):
        part = part.strip()
        if part.startswith('"'):
            out += bytes(part[1:-1], "utf-8").decode("unicode_escape")
            continue
        m = re.fullmatch(r"ServerTopicConfigSynonyms\.serverSynonym\((.*)\)", part)
        if m:
            out += SYN[resolve(m.group(1), cls, depth + 1)]
            continue
        name = part if "." in part else f"{cls}.{part}"
        if name.count(".") > 1:
            name = ".".join(name.split(".")[-2:])
        if name not in consts:
            raise ValueError(f"{part} in {cls}")
        c, e = consts[name]
        out += resolve(e, c, depth + 1)
    return out


def split_plus(expr):
    parts, cur, q, depth = [], "", False, 0
    for ch in expr:
        if ch == '"' and (not cur.endswith("\\")):
            q = not q
        if not q and ch == "(":
            depth += 1
        if not q and ch == ")":
            depth -= 1
        if ch == "+" and not q and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return parts


for m in entry.finditer(table):
    kind, topic_const, broker = m.groups()
    topic = resolve(topic_const, "ServerTopicConfigSynonyms")
    SYN[topic] = {"sameName": topic, "sameNameWithLogPrefix": "log." + topic,
                  "sameNameWithLogCleanerPrefix": "log.cleaner." + topic}.get(kind) or \
        {"single": "", "singleWithLogPrefix": "log.", "singleWithLogCleanerPrefix": "log.cleaner.",
         "listWithLogPrefix": "log."}[kind] + broker

def config_defs(text):
    """The ConfigDef builder statements of a class: its *CONFIG_DEF
    initializers and a configDef() method's return."""
    out = []
    for m in re.finditer(r"CONFIG_DEF\s*=\s*new ConfigDef\(\)|configDef\(\)\s*\{\s*return new ConfigDef\(\)", text):
        i, depth, q = m.end(), 0, False
        while i < len(text):
            ch = text[i]
            if ch == '"' and text[i - 1] != "\\":
                q = not q
            elif not q and ch == "(":
                depth += 1
            elif not q and ch == ")":
                depth -= 1
            elif not q and ch == ";" and depth == 0:
                break
            i += 1
        out.append(text[m.start():i])
    if not out:
        sys.exit("no ConfigDef found")
    return "\n".join(out)


names = set()
define = re.compile(r"\.define(?:Internal)?\(\s*([\w.]+|\"[^\"]*\")\s*,")
for cls in CLASSES:
    for m in define.finditer(config_defs(sources[cls])):
        arg = m.group(1)
        if arg.startswith('"'):
            names.add(arg[1:-1])
            continue
        try:
            names.add(resolve(arg, cls))
        except ValueError as e:
            sys.exit(f"cannot resolve {arg} in {cls}: {e}")

print(f"""// Code generated by deploy/scripts/gen-kafka-broker-configs.py from Kafka's
// source at tag {tag} (the names AbstractKafkaConfig.CONFIG_DEF defines);
// DO NOT EDIT. Regenerate with:
//
//	deploy/scripts/gen-kafka-broker-configs.py /work/.mirror/apache+kafka/repo {tag} > broker/kafka_broker_configs.go

package broker

// kafkaBrokerConfigNames are the broker config names Kafka {tag.split('-')[0]} knows.
var kafkaBrokerConfigNames = []string{{""")
for n in sorted(names):
    print(f"\t{n!r},".replace("'", '"'))
print("}")
