"""A Python client of the msvmav service, on httpx. It imports none of the service's modules
(no fastapi, sqlalchemy or ``app``): install it next to the service or on its own.

    from msvmav_client import Client

    with Client("http://127.0.0.1:8000", api_key="msv_...") as client:
        dataset = client.upload("examples/wdbc.arff")
        job = client.train(dataset["id"], alpha=16, beta=0.25, test_fraction=0.2)
        job.wait(progress=lambda j: print(j["status"], j["progress"]))
        print(client.predict(job.model_id, rows)["predictions"])
"""

from msvmav_client.client import Client, FileLike, Job, ModelRef
from msvmav_client.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    JobFailed,
    NotFound,
    ProblemError,
    ServerError,
    ServiceUnavailable,
    TooLarge,
    Unauthorized,
    ValidationFailed,
)

__all__ = [
    "BadRequest",
    "Client",
    "Conflict",
    "FileLike",
    "Forbidden",
    "Job",
    "JobFailed",
    "ModelRef",
    "NotFound",
    "ProblemError",
    "ServerError",
    "ServiceUnavailable",
    "TooLarge",
    "Unauthorized",
    "ValidationFailed",
]
