"""The answer that fails a whole request with one error, in the shape of its API's response.

Kafka gives every request class a ``getErrorResponse``: when a handler throws, the broker answers with
the response its client expects, every topic, partition, group or resource it named carrying the error
code (``UNKNOWN_SERVER_ERROR`` for an exception it does not know), so the client fails that request and
nothing else. ``error_response`` is that rule for every request kafkalite serves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafkalite.protocol import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterConfigsResult,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterReplicaLogDirResult,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    ConsumerGroupDescribedGroup,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableGroupResult,
    DeletableTopicResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsPartitionResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ElectionResult,
    ElectLeadersRequest,
    ElectLeadersResponse,
    EndTxnRequest,
    EndTxnResponse,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochPartitionResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    PartitionError,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ReassignmentResult,
    Request,
    Response,
    StopReplicaRequest,
    StopReplicaResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicMetadata,
    TxnMarkerResult,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkalite.protocol import security_admin as sa

UNKNOWN_SERVER_ERROR = -1

_Builder = Callable[[Any, int, "str | None"], Response]


def _per_partition(resp: type, entry: type, field: str = "partitions", **fill: Any) -> _Builder:
    def build(req: Any, code: int, _msg: str | None) -> Response:
        return resp(**{field: tuple(entry(tp=p.tp, error_code=code, **fill) for p in req.partitions)})

    return build


def _top_level(resp: type, **fill: Any) -> _Builder:
    return lambda _req, code, _msg: resp(error_code=code, **fill)


def _configs(resp: type, result: type) -> _Builder:
    def build(req: Any, code: int, msg: str | None) -> Response:
        return resp(
            results=tuple(
                result(
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    error_code=code,
                    error_message=msg,
                )
                for r in req.resources
            )
        )

    return build


_BUILDERS: dict[type[Request], _Builder] = {
    ProduceRequest: _per_partition(ProduceResponse, ProducePartitionResponse),
    FetchRequest: lambda req, code, _m: FetchResponse(
        error_code=code,
        session_id=req.session_id,
        partitions=tuple(FetchPartitionResponse(tp=p.tp, error_code=code) for p in req.partitions),
    ),
    ListOffsetsRequest: _per_partition(ListOffsetsResponse, ListOffsetsPartitionResponse),
    OffsetForLeaderEpochRequest: _per_partition(
        OffsetForLeaderEpochResponse, OffsetForLeaderEpochPartitionResponse
    ),
    MetadataRequest: lambda req, code, _m: MetadataResponse(
        topics=tuple(TopicMetadata(name=t, error_code=code) for t in req.topics or ())
        + tuple(TopicMetadata(name=None, topic_id=i, error_code=code) for i in req.topic_ids)
    ),
    CreateTopicsRequest: lambda req, code, msg: CreateTopicsResponse(
        topics=tuple(
            CreatableTopicResult(name=t.name, error_code=code, error_message=msg) for t in req.topics
        )
    ),
    CreatePartitionsRequest: lambda req, code, msg: CreatePartitionsResponse(
        results=tuple(
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=msg) for t in req.topics
        )
    ),
    DeleteTopicsRequest: lambda req, code, msg: DeleteTopicsResponse(
        topics=tuple(
            DeletableTopicResult(name=n, error_code=code, error_message=msg) for n in req.topic_names
        )
    ),
    DeleteRecordsRequest: _per_partition(DeleteRecordsResponse, DeleteRecordsPartitionResponse),
    DescribeClusterRequest: _top_level(DescribeClusterResponse),
    DescribeQuorumRequest: _top_level(DescribeQuorumResponse),
    DescribeConfigsRequest: _configs(DescribeConfigsResponse, DescribeConfigsResult),
    AlterConfigsRequest: _configs(AlterConfigsResponse, AlterConfigsResult),
    IncrementalAlterConfigsRequest: _configs(IncrementalAlterConfigsResponse, AlterConfigsResult),
    DescribeLogDirsRequest: _top_level(DescribeLogDirsResponse),
    AlterReplicaLogDirsRequest: lambda req, code, _m: AlterReplicaLogDirsResponse(
        results=tuple(AlterReplicaLogDirResult(tp=tp, error_code=code) for tp in req.targets())
    ),
    LeaderAndIsrRequest: lambda req, code, _m: LeaderAndIsrResponse(
        error_code=code,
        partition_errors=tuple(PartitionError(tp=s.tp, error_code=code) for s in req.partition_states),
    ),
    StopReplicaRequest: lambda req, code, _m: StopReplicaResponse(
        error_code=code,
        partition_errors=tuple(PartitionError(tp=s.tp, error_code=code) for s in req.partition_states),
    ),
    UpdateMetadataRequest: _top_level(UpdateMetadataResponse),
    ControlledShutdownRequest: _top_level(ControlledShutdownResponse),
    ElectLeadersRequest: lambda req, code, msg: ElectLeadersResponse(
        error_code=code,
        results=tuple(
            ElectionResult(tp=tp, error_code=code, error_message=msg) for tp in req.partitions or ()
        ),
    ),
    AlterPartitionReassignmentsRequest: lambda req, code, msg: AlterPartitionReassignmentsResponse(
        error_code=code,
        error_message=msg,
        results=tuple(
            ReassignmentResult(tp=r.tp, error_code=code, error_message=msg) for r in req.reassignments
        ),
    ),
    ListPartitionReassignmentsRequest: lambda _req, code, msg: ListPartitionReassignmentsResponse(
        error_code=code, error_message=msg
    ),
    AlterPartitionRequest: lambda req, code, _m: AlterPartitionResponse(
        error_code=code,
        partitions=tuple(AlterPartitionResult(tp=p.tp, error_code=code) for p in req.partitions),
    ),
    FindCoordinatorRequest: lambda _req, code, msg: FindCoordinatorResponse(
        error_code=code, error_message=msg
    ),
    JoinGroupRequest: lambda req, code, _m: JoinGroupResponse(error_code=code, member_id=req.member_id),
    SyncGroupRequest: _top_level(SyncGroupResponse),
    HeartbeatRequest: _top_level(HeartbeatResponse),
    LeaveGroupRequest: _top_level(LeaveGroupResponse),
    ConsumerGroupHeartbeatRequest: lambda _req, code, msg: ConsumerGroupHeartbeatResponse(
        error_code=code, error_message=msg
    ),
    ConsumerGroupDescribeRequest: lambda req, code, msg: ConsumerGroupDescribeResponse(
        groups=tuple(
            ConsumerGroupDescribedGroup(group_id=g, error_code=code, error_message=msg) for g in req.group_ids
        )
    ),
    OffsetCommitRequest: _per_partition(OffsetCommitResponse, PartitionError),
    OffsetFetchRequest: lambda req, code, _m: OffsetFetchResponse(
        error_code=code,
        partitions=tuple(OffsetFetchPartitionResponse(tp=tp, error_code=code) for tp in req.partitions or ()),
    ),
    DescribeGroupsRequest: lambda req, code, _m: DescribeGroupsResponse(
        groups=tuple(DescribedGroup(group_id=g, error_code=code) for g in req.groups)
    ),
    ListGroupsRequest: _top_level(ListGroupsResponse),
    DeleteGroupsRequest: lambda req, code, _m: DeleteGroupsResponse(
        results=tuple(DeletableGroupResult(group_id=g, error_code=code) for g in req.groups)
    ),
    InitProducerIdRequest: _top_level(InitProducerIdResponse),
    AddPartitionsToTxnRequest: lambda req, code, _m: AddPartitionsToTxnResponse(
        results=tuple(PartitionError(tp=tp, error_code=code) for tp in req.partitions)
    ),
    AddOffsetsToTxnRequest: _top_level(AddOffsetsToTxnResponse),
    TxnOffsetCommitRequest: _per_partition(TxnOffsetCommitResponse, PartitionError),
    EndTxnRequest: _top_level(EndTxnResponse),
    WriteTxnMarkersRequest: lambda req, code, _m: WriteTxnMarkersResponse(
        markers=tuple(
            TxnMarkerResult(
                producer_id=m.producer_id,
                partitions=tuple(PartitionError(tp=tp, error_code=code) for tp in m.partitions),
            )
            for m in req.markers
        )
    ),
    sa.CreateAclsRequest: lambda req, code, msg: sa.CreateAclsResponse(
        results=tuple(sa.AclCreationResult(error_code=code, error_message=msg) for _ in req.creations)
    ),
    sa.DeleteAclsRequest: lambda req, code, msg: sa.DeleteAclsResponse(
        filter_results=tuple(
            sa.DeleteAclsFilterResult(error_code=code, error_message=msg) for _ in req.filters
        )
    ),
    sa.AlterUserScramCredentialsRequest: lambda req, code, msg: sa.AlterUserScramCredentialsResponse(
        results=tuple(
            sa.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=msg)
            for u in sa.users_of(req)
        )
    ),
}


def error_response(
    request: Request, code: int = UNKNOWN_SERVER_ERROR, message: str | None = None
) -> Response:
    """``request``'s response with ``code`` for everything it asked about (Kafka's ``getErrorResponse``)."""
    build = _BUILDERS.get(type(request))
    if build is None:
        return request.response_type()
    return build(request, code, message)


__all__ = ["UNKNOWN_SERVER_ERROR", "error_response"]
