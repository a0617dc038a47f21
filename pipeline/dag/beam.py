"""The Beam components' pipeline args: DirectRunner flags locally, DataflowRunner with the dataflow section."""

from __future__ import annotations

from pipeline.config import Config, join


def beam_pipeline_args(config: Config) -> list[str]:
    """DirectRunner flags locally; DataflowRunner with the pipeline image on Vertex."""
    flow = config.dataflow
    if flow is None or not flow.enabled:
        return config.beam.args
    vertex = config.vertex
    tmp = join(config.pipeline.root_uri, "tmp", "dataflow")
    args = [
        "--runner=DataflowRunner",
        f"--project={vertex.project}",
        f"--region={vertex.region}",
        f"--temp_location={tmp}/temp",
        f"--staging_location={tmp}/staging",
        f"--machine_type={flow.machine_type}",
        f"--max_num_workers={flow.max_num_workers}",
        f"--disk_size_gb={flow.disk_size_gb}",
        f"--service_account_email={flow.service_account or vertex.service_account}",
        # The workers run the same image as the pipeline steps: same code, same pins.
        f"--sdk_container_image={vertex.pipeline_image}",
        "--experiments=use_runner_v2",
        *(f"--labels={k}={v}" for k, v in sorted(vertex.labels.items())),
    ]
    if flow.subnetwork:
        args.append(f"--subnetwork={flow.subnetwork}")
    if not flow.use_public_ips:
        args.append("--no_use_public_ips")
    return [*args, *config.beam.extra_args]
