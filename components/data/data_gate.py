"""DataGate: stop the run when ExampleValidator found anomalies. Why: docs/internals.md."""


import dataclasses
import logging
import os

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.types.standard_artifacts import ExampleAnomalies

from components.errors import DataAnomaliesError

ANOMALIES_FILE = "SchemaDiff.pb"
DATASET = "(dataset)"


@dataclasses.dataclass(frozen=True)
class Anomaly:
    split: str
    feature: str
    kind: str
    description: str

    def __str__(self) -> str:
        return f"split {self.split}, feature {self.feature}: {self.kind}: {self.description}"


def read_anomalies(anomalies: ExampleAnomalies) -> list[Anomaly]:
    found = []
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        proto = anomalies_pb2.Anomalies()
        path = os.path.join(artifact_utils.get_split_uri([anomalies], split), ANOMALIES_FILE)
        with fileio.open(path, "rb") as f:
            proto.ParseFromString(f.read())
        infos = [(name, info) for name, info in sorted(proto.anomaly_info.items())]
        if proto.HasField("dataset_anomaly_info"):
            infos.append((DATASET, proto.dataset_anomaly_info))
        for name, info in infos:
            for reason in info.reason:
                kind = anomalies_pb2.AnomalyInfo.Type.Name(reason.type)
                found.append(Anomaly(split, name, kind, reason.description or reason.short_description))
        if proto.data_missing:
            found.append(Anomaly(split, DATASET, "NO_DATA_IN_SPAN", "the split has no examples"))
    return found


def check(found: list[Anomaly], tolerated: frozenset[str]) -> None:
    """Raises DataAnomaliesError listing every anomaly whose kind is not tolerated."""
    for a in found:
        if a.kind in tolerated:
            logging.warning("data gate: tolerated anomaly %s", a)
    blocking = [a for a in found if a.kind not in tolerated]
    if blocking:
        lines = [f"ExampleValidator found {len(blocking)} anomal{'y' if len(blocking) == 1 else 'ies'} "
                 "in the input data; stopping before Transform and Trainer:"]
        lines += [f"  {a}" for a in blocking]
        if any(a.kind == "UNEXPECTED_DATA_TYPE" for a in blocking):
            lines.append("A column of numbers holds text: if that text marks a missing value (like NA), "
                         "add it to data.missing_values.")
        lines.append("Fix the data, or if the change is legitimate, update the schema (data.schema_file) in "
                     "review; kinds to accept can be listed in data_gate.tolerated_anomalies.")
        raise DataAnomaliesError("\n".join(lines))


@component
def DataGate(anomalies: InputArtifact[ExampleAnomalies], tolerated_anomalies: Parameter[str] = "") -> None:
    """tolerated_anomalies: comma-separated anomaly kinds (AnomalyInfo.Type names) that do not stop the run."""
    check(read_anomalies(anomalies), frozenset(filter(None, tolerated_anomalies.split(","))))
