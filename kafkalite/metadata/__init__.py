"""KRaft's metadata (Kafka's ``metadata`` module): the records of ``__cluster_metadata`` (``records``,
framed by ``serde``), the image a node builds by replaying them (``image``, ``delta``, ``image_writer``,
``metadata_loader``), the quorum controller that writes them (``controller``) and the broker's side of
registration and heartbeats (``broker_lifecycle_manager``).

Hosting: a controller is a ``controller.controller_server.ControllerServer`` (a Raft voter running the
``QuorumController``) over a log dir formatted by ``kafkalite storage format``; a broker is a
``kafkalite.broker.broker_server.BrokerServer`` (an observer of the quorum with the usual replica manager).
Both are simulator nodes, so they run in one ``SimNetwork`` (``kafkalite.host.kraft_cluster.KRaftCluster``)
or across processes over the TCP bridge like the ZooKeeper-mode broker.
"""
