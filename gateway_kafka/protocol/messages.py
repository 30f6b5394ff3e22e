"""Every Kafka API Rockafka speaks, declared once in the schema DSL (see ``schema.py``).

Facts (field names, types, version ranges, nullable/tagged versions, tags, defaults,
valid and flexible versions) follow Apache Kafka's message definitions
(clients/src/main/resources/common/message/*Request.json / *Response.json). Field names are
the snake_case of Kafka's names. Each ``api`` call registers one API key; a duplicate key
fails at import. To add a version: widen the range and add the fields with their versions.
"""

from .schema import api

# flake8: noqa: E501

api(18, "ApiVersions", "0-4", flexible="3+",
    request="""
    client_software_name: string 3+
    client_software_version: string 3+
""",
    response="""
    error_code: int16
    api_keys: []
      api_key: int16
      min_version: int16
      max_version: int16
    throttle_time_ms: int32 1+
    supported_features: [] 3+ tag:0:3+
      name: string 3+
      min_version: int16 3+
      max_version: int16 3+
    finalized_features_epoch: int64 3+ tag:1:3+ =-1
    finalized_features: [] 3+ tag:2:3+
      name: string 3+
      max_version_level: int16 3+
      min_version_level: int16 3+
    zk_migration_ready: bool 3+ tag:3:3+ =false
""")

api(3, "Metadata", "0-12", flexible="9+",
    request="""
    topics: [] null:1+
      topic_id: uuid 10+
      name: string null:10+
    allow_auto_topic_creation: bool 4+ =true
    include_cluster_authorized_operations: bool 8-10
    include_topic_authorized_operations: bool 8+
""",
    response="""
    throttle_time_ms: int32 3+
    brokers: []
      node_id: int32
      host: string
      port: int32
      rack: string 1+ null:1+ =null
    cluster_id: string 2+ null:2+ =null
    controller_id: int32 1+ =-1
    topics: []
      error_code: int16
      name: string null:12+
      topic_id: uuid 10+
      is_internal: bool 1+ =false
      partitions: []
        error_code: int16
        partition_index: int32
        leader_id: int32
        leader_epoch: int32 7+ =-1
        replica_nodes: [int32]
        isr_nodes: [int32]
        offline_replicas: [int32] 5+
      topic_authorized_operations: int32 8+ =-2147483648
    cluster_authorized_operations: int32 8-10 =-2147483648
""")

api(0, "Produce", "0-13", flexible="9+",
    request="""
    transactional_id: string 3+ null:3+ =null
    acks: int16
    timeout_ms: int32
    topic_data: []
      name: string 0-12
      topic_id: uuid 13+
      partition_data: []
        index: int32
        records: records null:0+
""",
    response="""
    responses: []
      name: string 0-12
      topic_id: uuid 13+
      partition_responses: []
        index: int32
        error_code: int16
        base_offset: int64
        log_append_time_ms: int64 2+ =-1
        log_start_offset: int64 5+ =-1
        record_errors: [] 8+
          batch_index: int32 8+
          batch_index_error_message: string 8+ null:8+ =null
        error_message: string 8+ null:8+ =null
        current_leader: {} 10+ tag:0:10+
          leader_id: int32 10+ =-1
          leader_epoch: int32 10+ =-1
    throttle_time_ms: int32 1+ =0
    node_endpoints: [] 10+ tag:0:10+
      node_id: int32 10+
      host: string 10+
      port: int32 10+
      rack: string 10+ null:10+ =null
""")

api(1, "Fetch", "0-17", flexible="12+",
    request="""
    cluster_id: string 12+ null:12+ tag:0:12+ =null
    replica_id: int32 0-14 =-1
    replica_state: {} 15+ tag:1:15+
      replica_id: int32 15+ =-1
      replica_epoch: int64 15+ =-1
    max_wait_ms: int32
    min_bytes: int32
    max_bytes: int32 3+ =0x7fffffff
    isolation_level: int8 4+ =0
    session_id: int32 7+ =0
    session_epoch: int32 7+ =-1
    topics: []
      topic: string 0-12
      topic_id: uuid 13+
      partitions: []
        partition: int32
        current_leader_epoch: int32 9+ =-1
        fetch_offset: int64
        last_fetched_epoch: int32 12+ =-1
        log_start_offset: int64 5+ =-1
        partition_max_bytes: int32
        replica_directory_id: uuid 17+ tag:0:17+
    forgotten_topics_data: [] 7+
      topic: string 7-12
      topic_id: uuid 13+
      partitions: [int32] 7+
    rack_id: string 11+ =""
""",
    response="""
    throttle_time_ms: int32 1+
    error_code: int16 7+
    session_id: int32 7+ =0
    responses: []
      topic: string 0-12
      topic_id: uuid 13+
      partitions: []
        partition_index: int32
        error_code: int16
        high_watermark: int64
        last_stable_offset: int64 4+ =-1
        log_start_offset: int64 5+ =-1
        diverging_epoch: {} 12+ tag:0:12+
          epoch: int32 12+ =-1
          end_offset: int64 12+ =-1
        current_leader: {} 12+ tag:1:12+
          leader_id: int32 12+ =-1
          leader_epoch: int32 12+ =-1
        snapshot_id: {} 12+ tag:2:12+
          end_offset: int64 =-1
          epoch: int32 =-1
        aborted_transactions: [] 4+ null:4+
          producer_id: int64 4+
          first_offset: int64 4+
        preferred_read_replica: int32 11+ =-1
        records: records null:0+
    node_endpoints: [] 16+ tag:0:16+
      node_id: int32 16+
      host: string 16+
      port: int32 16+
      rack: string 16+ null:16+ =null
""")

api(2, "ListOffsets", "0-10", flexible="6+",
    request="""
    replica_id: int32
    isolation_level: int8 2+
    topics: []
      name: string
      partitions: []
        partition_index: int32
        current_leader_epoch: int32 4+ =-1
        timestamp: int64
        max_num_offsets: int32 0 =1
    timeout_ms: int32 10+
""",
    response="""
    throttle_time_ms: int32 2+
    topics: []
      name: string
      partitions: []
        partition_index: int32
        error_code: int16
        old_style_offsets: [int64] 0
        timestamp: int64 1+ =-1
        offset: int64 1+ =-1
        leader_epoch: int32 4+ =-1
""")

api(10, "FindCoordinator", "0-6", flexible="3+",
    request="""
    key: string 0-3
    key_type: int8 1+ =0
    coordinator_keys: [string] 4+
""",
    response="""
    throttle_time_ms: int32 1+
    error_code: int16 0-3
    error_message: string 1-3 null:1-3
    node_id: int32 0-3
    host: string 0-3
    port: int32 0-3
    coordinators: [] 4+
      key: string 4+
      node_id: int32 4+
      host: string 4+
      port: int32 4+
      error_code: int16 4+
      error_message: string 4+ null:4+
""")

api(11, "JoinGroup", "0-9", flexible="6+",
    request="""
    group_id: string
    session_timeout_ms: int32
    rebalance_timeout_ms: int32 1+ =-1
    member_id: string
    group_instance_id: string 5+ null:5+ =null
    protocol_type: string
    protocols: []
      name: string
      metadata: bytes
    reason: string 8+ null:8+ =null
""",
    response="""
    throttle_time_ms: int32 2+
    error_code: int16
    generation_id: int32 =-1
    protocol_type: string 7+ null:7+ =null
    protocol_name: string null:7+
    leader: string
    skip_assignment: bool 9+ =false
    member_id: string
    members: []
      member_id: string
      group_instance_id: string 5+ null:5+ =null
      metadata: bytes
""")

api(14, "SyncGroup", "0-5", flexible="4+",
    request="""
    group_id: string
    generation_id: int32
    member_id: string
    group_instance_id: string 3+ null:3+ =null
    protocol_type: string 5+ null:5+ =null
    protocol_name: string 5+ null:5+ =null
    assignments: []
      member_id: string
      assignment: bytes
""",
    response="""
    throttle_time_ms: int32 1+
    error_code: int16
    protocol_type: string 5+ null:5+ =null
    protocol_name: string 5+ null:5+ =null
    assignment: bytes
""")

api(12, "Heartbeat", "0-4", flexible="4+",
    request="""
    group_id: string
    generation_id: int32
    member_id: string
    group_instance_id: string 3+ null:3+ =null
""",
    response="""
    throttle_time_ms: int32 1+
    error_code: int16
""")

api(13, "LeaveGroup", "0-5", flexible="4+",
    request="""
    group_id: string
    member_id: string 0-2
    members: [] 3+
      member_id: string 3+
      group_instance_id: string 3+ null:3+ =null
      reason: string 5+ null:5+ =null
""",
    response="""
    throttle_time_ms: int32 1+
    error_code: int16
    members: [] 3+
      member_id: string 3+
      group_instance_id: string 3+ null:3+
      error_code: int16 3+
""")

api(8, "OffsetCommit", "0-10", flexible="8+",
    request="""
    group_id: string
    generation_id_or_member_epoch: int32 1+ =-1
    member_id: string 1+
    group_instance_id: string 7+ null:7+ =null
    retention_time_ms: int64 2-4 =-1
    topics: []
      name: string 0-9
      topic_id: uuid 10+
      partitions: []
        partition_index: int32
        committed_offset: int64
        committed_leader_epoch: int32 6+ =-1
        commit_timestamp: int64 1 =-1
        committed_metadata: string null:0+
""",
    response="""
    throttle_time_ms: int32 3+
    topics: []
      name: string 0-9
      topic_id: uuid 10+
      partitions: []
        partition_index: int32
        error_code: int16
""")

api(9, "OffsetFetch", "0-10", flexible="6+",
    request="""
    group_id: string 0-7
    topics: [] 0-7 null:2-7
      name: string 0-7
      partition_indexes: [int32] 0-7
    groups: [] 8+
      group_id: string 8+
      member_id: string 9+ null:9+ =null
      member_epoch: int32 9+ =-1
      topics: [] 8+ null:8+
        name: string 8-9
        topic_id: uuid 10+
        partition_indexes: [int32] 8+
    require_stable: bool 7+ =false
""",
    response="""
    throttle_time_ms: int32 3+
    topics: [] 0-7
      name: string 0-7
      partitions: [] 0-7
        partition_index: int32 0-7
        committed_offset: int64 0-7
        committed_leader_epoch: int32 5-7 =-1
        metadata: string 0-7 null:0-7
        error_code: int16 0-7
    error_code: int16 2-7 =0
    groups: [] 8+
      group_id: string 8+
      topics: [] 8+
        name: string 8-9
        topic_id: uuid 10+
        partitions: [] 8+
          partition_index: int32 8+
          committed_offset: int64 8+
          committed_leader_epoch: int32 8+ =-1
          metadata: string 8+ null:8+
          error_code: int16 8+
      error_code: int16 8+ =0
""")

api(15, "DescribeGroups", "0-6", flexible="5+",
    request="""
    groups: [string]
    include_authorized_operations: bool 3+
""",
    response="""
    throttle_time_ms: int32 1+
    groups: []
      error_code: int16
      error_message: string 6+ null:6+ =null
      group_id: string
      group_state: string
      protocol_type: string
      protocol_data: string
      members: []
        member_id: string
        group_instance_id: string 4+ null:4+ =null
        client_id: string
        client_host: string
        member_metadata: bytes
        member_assignment: bytes
      authorized_operations: int32 3+ =-2147483648
""")

api(16, "ListGroups", "0-5", flexible="3+",
    request="""
    states_filter: [string] 4+
    types_filter: [string] 5+
""",
    response="""
    throttle_time_ms: int32 1+
    error_code: int16
    groups: []
      group_id: string
      protocol_type: string
      group_state: string 4+
      group_type: string 5+
""")

api(42, "DeleteGroups", "0-2", flexible="2+",
    request="""
    groups_names: [string]
""",
    response="""
    throttle_time_ms: int32
    results: []
      group_id: string
      error_code: int16
""")

api(47, "OffsetDelete", "0", flexible="none",
    request="""
    group_id: string
    topics: []
      name: string
      partitions: []
        partition_index: int32
""",
    response="""
    error_code: int16
    throttle_time_ms: int32
    topics: []
      name: string
      partitions: []
        partition_index: int32
        error_code: int16
""")

api(19, "CreateTopics", "0-7", flexible="5+",
    request="""
    topics: []
      name: string
      num_partitions: int32
      replication_factor: int16
      assignments: []
        partition_index: int32
        broker_ids: [int32]
      configs: []
        name: string
        value: string null:0+
    timeout_ms: int32 =60000
    validate_only: bool 1+ =false
""",
    response="""
    throttle_time_ms: int32 2+
    topics: []
      name: string
      topic_id: uuid 7+
      error_code: int16
      error_message: string 1+ null:0+
      topic_config_error_code: int16 5+ tag:0:5+
      num_partitions: int32 5+ =-1
      replication_factor: int16 5+ =-1
      configs: [] 5+ null:5+
        name: string 5+
        value: string 5+ null:5+
        read_only: bool 5+
        config_source: int8 5+ =-1
        is_sensitive: bool 5+
""")

api(20, "DeleteTopics", "0-6", flexible="4+",
    request="""
    topics: [] 6+
      name: string 6+ null:6+ =null
      topic_id: uuid 6+
    topic_names: [string] 0-5
    timeout_ms: int32
""",
    response="""
    throttle_time_ms: int32 1+
    responses: []
      name: string null:6+
      topic_id: uuid 6+
      error_code: int16
      error_message: string 5+ null:5+ =null
""")

api(37, "CreatePartitions", "0-3", flexible="2+",
    request="""
    topics: []
      name: string
      count: int32
      assignments: [] null:0+
        broker_ids: [int32]
    timeout_ms: int32
    validate_only: bool
""",
    response="""
    throttle_time_ms: int32
    results: []
      name: string
      error_code: int16
      error_message: string null:0+ =null
""")

api(21, "DeleteRecords", "0-2", flexible="2+",
    request="""
    topics: []
      name: string
      partitions: []
        partition_index: int32
        offset: int64
    timeout_ms: int32
""",
    response="""
    throttle_time_ms: int32
    topics: []
      name: string
      partitions: []
        partition_index: int32
        low_watermark: int64
        error_code: int16
""")

api(43, "ElectLeaders", "0-2", flexible="2+",
    request="""
    election_type: int8 1+
    topic_partitions: [] null:0+
      topic: string
      partitions: [int32]
    timeout_ms: int32
""",
    response="""
    throttle_time_ms: int32
    error_code: int16 1+
    replica_election_results: []
      topic: string
      partition_result: []
        partition_id: int32
        error_code: int16
        error_message: string null:0+
""")

api(32, "DescribeConfigs", "0-4", flexible="4+",
    request="""
    resources: []
      resource_type: int8
      resource_name: string
      configuration_keys: [string] null:0+
    include_synonyms: bool 1+ =false
    include_documentation: bool 3+ =false
""",
    response="""
    throttle_time_ms: int32
    results: []
      error_code: int16
      error_message: string null:0+
      resource_type: int8
      resource_name: string
      configs: []
        name: string
        value: string null:0+
        read_only: bool
        is_default: bool 0
        config_source: int8 1+ =-1
        is_sensitive: bool
        synonyms: [] 1+
          name: string 1+
          value: string 1+ null:0+
          source: int8 1+
        config_type: int8 3+ =0
        documentation: string 3+ null:0+
""")

api(33, "AlterConfigs", "0-2", flexible="2+",
    request="""
    resources: []
      resource_type: int8
      resource_name: string
      configs: []
        name: string
        value: string null:0+
    validate_only: bool
""",
    response="""
    throttle_time_ms: int32
    responses: []
      error_code: int16
      error_message: string null:0+
      resource_type: int8
      resource_name: string
""")

api(44, "IncrementalAlterConfigs", "0-1", flexible="1+",
    request="""
    resources: []
      resource_type: int8
      resource_name: string
      configs: []
        name: string
        config_operation: int8
        value: string null:0+
    validate_only: bool
""",
    response="""
    throttle_time_ms: int32
    responses: []
      error_code: int16
      error_message: string null:0+
      resource_type: int8
      resource_name: string
""")

api(60, "DescribeCluster", "0-1", flexible="0+",
    request="""
    include_cluster_authorized_operations: bool
    endpoint_type: int8 1+ =1
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    endpoint_type: int8 1+ =1
    cluster_id: string
    controller_id: int32 =-1
    brokers: []
      broker_id: int32
      host: string
      port: int32
      rack: string null:0+ =null
    cluster_authorized_operations: int32 =-2147483648
""")

api(75, "DescribeTopicPartitions", "0", flexible="0+",
    request="""
    topics: []
      name: string
    response_partition_limit: int32 =2000
    cursor: {} null:0+ =null
      topic_name: string
      partition_index: int32
""",
    response="""
    throttle_time_ms: int32
    topics: []
      error_code: int16
      name: string null:0+
      topic_id: uuid
      is_internal: bool =false
      partitions: []
        error_code: int16
        partition_index: int32
        leader_id: int32
        leader_epoch: int32 =-1
        replica_nodes: [int32]
        isr_nodes: [int32]
        eligible_leader_replicas: [int32] null:0+ =null
        last_known_elr: [int32] null:0+ =null
        offline_replicas: [int32]
      topic_authorized_operations: int32 =-2147483648
    next_cursor: {} null:0+ =null
      topic_name: string
      partition_index: int32
""")

api(22, "InitProducerId", "0-5", flexible="2+",
    request="""
    transactional_id: string null:0+
    transaction_timeout_ms: int32
    producer_id: int64 3+ =-1
    producer_epoch: int16 3+ =-1
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    producer_id: int64 =-1
    producer_epoch: int16
""")

api(23, "OffsetForLeaderEpoch", "0-4", flexible="4+",
    request="""
    replica_id: int32 3+ =-2
    topics: []
      topic: string
      partitions: []
        partition: int32
        current_leader_epoch: int32 2+ =-1
        leader_epoch: int32
""",
    response="""
    throttle_time_ms: int32 2+
    topics: []
      topic: string
      partitions: []
        error_code: int16
        partition: int32
        leader_epoch: int32 1+ =-1
        end_offset: int64 =-1
""")

api(17, "SaslHandshake", "0-1", flexible="none",
    request="""
    mechanism: string
""",
    response="""
    error_code: int16
    mechanisms: [string]
""")

api(36, "SaslAuthenticate", "0-2", flexible="2+",
    request="""
    auth_bytes: bytes
""",
    response="""
    error_code: int16
    error_message: string null:0+
    auth_bytes: bytes
    session_lifetime_ms: int64 1+ =0
""")

api(24, "AddPartitionsToTxn", "0-5", flexible="3+",
    request="""
    transactions: [] 4+
      transactional_id: string 4+
      producer_id: int64 4+
      producer_epoch: int16 4+
      verify_only: bool 4+ =false
      topics: [] 4+
        name: string
        partitions: [int32]
    v3_and_below_transactional_id: string 0-3
    v3_and_below_producer_id: int64 0-3
    v3_and_below_producer_epoch: int16 0-3
    v3_and_below_topics: [] 0-3
      name: string
      partitions: [int32]
""",
    response="""
    throttle_time_ms: int32
    error_code: int16 4+
    results_by_transaction: [] 4+
      transactional_id: string 4+
      topic_results: [] 4+
        name: string
        results_by_partition: []
          partition_index: int32
          partition_error_code: int16
    results_by_topic_v3_and_below: [] 0-3
      name: string
      results_by_partition: []
        partition_index: int32
        partition_error_code: int16
""")

api(25, "AddOffsetsToTxn", "0-4", flexible="3+",
    request="""
    transactional_id: string
    producer_id: int64
    producer_epoch: int16
    group_id: string
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
""")

api(26, "EndTxn", "0-5", flexible="3+",
    request="""
    transactional_id: string
    producer_id: int64
    producer_epoch: int16
    committed: bool
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    producer_id: int64 5+ =-1
    producer_epoch: int16 5+ =-1
""")

api(27, "WriteTxnMarkers", "1-2", flexible="1+",
    request="""
    markers: []
      producer_id: int64
      producer_epoch: int16
      transaction_result: bool
      topics: []
        name: string
        partition_indexes: [int32]
      coordinator_epoch: int32
      transaction_version: int8 2+ =0
""",
    response="""
    markers: []
      producer_id: int64
      topics: []
        name: string
        partitions: []
          partition_index: int32
          error_code: int16
""")

api(28, "TxnOffsetCommit", "0-4", flexible="3+",
    request="""
    transactional_id: string
    group_id: string
    producer_id: int64
    producer_epoch: int16
    generation_id: int32 3+ =-1
    member_id: string 3+ =""
    group_instance_id: string 3+ null:3+ =null
    topics: []
      name: string
      partitions: []
        partition_index: int32
        committed_offset: int64
        committed_leader_epoch: int32 2+ =-1
        committed_metadata: string null:0+
""",
    response="""
    throttle_time_ms: int32
    topics: []
      name: string
      partitions: []
        partition_index: int32
        error_code: int16
""")

api(61, "DescribeProducers", "0", flexible="0+",
    request="""
    topics: []
      name: string
      partition_indexes: [int32]
""",
    response="""
    throttle_time_ms: int32
    topics: []
      name: string
      partitions: []
        partition_index: int32
        error_code: int16
        error_message: string null:0+ =null
        active_producers: []
          producer_id: int64
          producer_epoch: int32
          last_sequence: int32 =-1
          last_timestamp: int64 =-1
          coordinator_epoch: int32
          current_txn_start_offset: int64 =-1
""")

api(65, "DescribeTransactions", "0", flexible="0+",
    request="""
    transactional_ids: [string]
""",
    response="""
    throttle_time_ms: int32
    transaction_states: []
      error_code: int16
      transactional_id: string
      transaction_state: string
      transaction_timeout_ms: int32
      transaction_start_time_ms: int64
      producer_id: int64
      producer_epoch: int16
      topics: []
        topic: string
        partitions: [int32]
""")

api(66, "ListTransactions", "0-1", flexible="0+",
    request="""
    state_filters: [string]
    producer_id_filters: [int64]
    duration_filter: int64 1+ =-1
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    unknown_state_filters: [string]
    transaction_states: []
      transactional_id: string
      producer_id: int64
      transaction_state: string
""")

api(68, "ConsumerGroupHeartbeat", "0-1", flexible="0+",
    request="""
    group_id: string 0+
    member_id: string 0+
    member_epoch: int32 0+
    instance_id: string 0+ null:0+ =null
    rack_id: string 0+ null:0+ =null
    rebalance_timeout_ms: int32 0+ =-1
    subscribed_topic_names: [string] 0+ null:0+ =null
    subscribed_topic_regex: string 1+ null:1+ =null
    server_assignor: string 0+ null:0+ =null
    topic_partitions: [] 0+ null:0+ =null
      topic_id: uuid 0+
      partitions: [int32] 0+
""",
    response="""
    throttle_time_ms: int32 0+
    error_code: int16 0+
    error_message: string 0+ null:0+ =null
    member_id: string 0+ null:0+ =null
    member_epoch: int32 0+
    heartbeat_interval_ms: int32 0+
    assignment: {} 0+ null:0+ =null
      topic_partitions: [] 0+
        topic_id: uuid 0+
        partitions: [int32] 0+
""")

api(69, "ConsumerGroupDescribe", "0-1", flexible="0+",
    request="""
    group_ids: [string] 0+
    include_authorized_operations: bool 0+
""",
    response="""
    throttle_time_ms: int32 0+
    groups: [] 0+
      error_code: int16 0+
      error_message: string 0+ null:0+ =null
      group_id: string 0+
      group_state: string 0+
      group_epoch: int32 0+
      assignment_epoch: int32 0+
      assignor_name: string 0+
      members: [] 0+
        member_id: string 0+
        instance_id: string 0+ null:0+ =null
        rack_id: string 0+ null:0+ =null
        member_epoch: int32 0+
        client_id: string 0+
        client_host: string 0+
        subscribed_topic_names: [string] 0+
        subscribed_topic_regex: string 0+ null:0+ =null
        assignment: {} 0+
          topic_partitions: [] 0+
            topic_id: uuid 0+
            topic_name: string 0+
            partitions: [int32] 0+
        target_assignment: {} 0+
          topic_partitions: [] 0+
            topic_id: uuid 0+
            topic_name: string 0+
            partitions: [int32] 0+
        member_type: int8 1+ =-1
      authorized_operations: int32 0+ =-2147483648
""")

api(29, "DescribeAcls", "1-3", flexible="2+",
    request="""
    resource_type_filter: int8
    resource_name_filter: string null:0+
    pattern_type_filter: int8 1+ =3
    principal_filter: string null:0+
    host_filter: string null:0+
    operation: int8
    permission_type: int8
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+
    resources: []
      resource_type: int8
      resource_name: string
      pattern_type: int8 1+ =3
      acls: []
        principal: string
        host: string
        operation: int8
        permission_type: int8
""")

api(30, "CreateAcls", "1-3", flexible="2+",
    request="""
    creations: []
      resource_type: int8
      resource_name: string
      resource_pattern_type: int8 1+ =3
      principal: string
      host: string
      operation: int8
      permission_type: int8
""",
    response="""
    throttle_time_ms: int32
    results: []
      error_code: int16
      error_message: string null:0+
""")

api(31, "DeleteAcls", "1-3", flexible="2+",
    request="""
    filters: []
      resource_type_filter: int8
      resource_name_filter: string null:0+
      pattern_type_filter: int8 1+ =3
      principal_filter: string null:0+
      host_filter: string null:0+
      operation: int8
      permission_type: int8
""",
    response="""
    throttle_time_ms: int32
    filter_results: []
      error_code: int16
      error_message: string null:0+
      matching_acls: []
        error_code: int16
        error_message: string null:0+
        resource_type: int8
        resource_name: string
        pattern_type: int8 1+ =3
        principal: string
        host: string
        operation: int8
        permission_type: int8
""")

api(50, "DescribeUserScramCredentials", "0-0", flexible="0+",
    request="""
    users: [] null:0+
      name: string
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+
    results: []
      user: string
      error_code: int16
      error_message: string null:0+
      credential_infos: []
        mechanism: int8
        iterations: int32
""")

api(51, "AlterUserScramCredentials", "0-0", flexible="0+",
    request="""
    deletions: []
      name: string
      mechanism: int8
    upsertions: []
      name: string
      mechanism: int8
      iterations: int32
      salt: bytes
      salted_password: bytes
""",
    response="""
    throttle_time_ms: int32
    results: []
      user: string
      error_code: int16
      error_message: string null:0+
""")

api(48, "DescribeClientQuotas", "0-1", flexible="1+",
    request="""
    components: []
      entity_type: string
      match_type: int8
      match: string null:0+
    strict: bool
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+
    entries: [] null:0+
      entity: []
        entity_type: string
        entity_name: string null:0+
      values: []
        key: string
        value: float64
""")

api(49, "AlterClientQuotas", "0-1", flexible="1+",
    request="""
    entries: []
      entity: []
        entity_type: string
        entity_name: string null:0+
      ops: []
        key: string
        value: float64
        remove: bool
    validate_only: bool
""",
    response="""
    throttle_time_ms: int32
    entries: []
      error_code: int16
      error_message: string null:0+
      entity: []
        entity_type: string
        entity_name: string null:0+
""")

api(35, "DescribeLogDirs", "1-4", flexible="2+",
    request="""
    topics: [] null:0+
      topic: string
      partitions: [int32]
""",
    response="""
    throttle_time_ms: int32
    error_code: int16 3+
    results: []
      error_code: int16
      log_dir: string
      topics: []
        name: string
        partitions: []
          partition_index: int32
          partition_size: int64
          offset_lag: int64
          is_future_key: bool
      total_bytes: int64 4+ =-1
      usable_bytes: int64 4+ =-1
""")

api(45, "AlterPartitionReassignments", "0", flexible="0+",
    request="""
    timeout_ms: int32 =60000
    topics: []
      name: string
      partitions: []
        partition_index: int32
        replicas: [int32] null:0+
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+
    responses: []
      name: string
      partitions: []
        partition_index: int32
        error_code: int16
        error_message: string null:0+
""")

api(46, "ListPartitionReassignments", "0", flexible="0+",
    request="""
    timeout_ms: int32 =60000
    topics: [] null:0+ =null
      name: string
      partition_indexes: [int32]
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+
    topics: []
      name: string
      partitions: []
        partition_id: int32
        current_brokers: [int32]
        target_brokers: [int32]
""")

# KIP-932 share groups (Kafka 4.1+; v0 was early access and removed: not offered)
api(76, "ShareGroupHeartbeat", "1", flexible="0+",
    request="""
    group_id: string
    member_id: string
    member_epoch: int32
    rack_id: string null:0+ =null
    subscribed_topic_names: [string] null:0+ =null
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    member_id: string null:0+ =null
    member_epoch: int32
    heartbeat_interval_ms: int32
    assignment: {} null:0+ =null
      topic_partitions: []
        topic_id: uuid
        partitions: [int32]
""")

api(77, "ShareGroupDescribe", "1", flexible="0+",
    request="""
    group_ids: [string]
    include_authorized_operations: bool
""",
    response="""
    throttle_time_ms: int32
    groups: []
      error_code: int16
      error_message: string null:0+ =null
      group_id: string
      group_state: string
      group_epoch: int32
      assignment_epoch: int32
      assignor_name: string
      members: []
        member_id: string
        rack_id: string null:0+ =null
        member_epoch: int32
        client_id: string
        client_host: string
        subscribed_topic_names: [string]
        assignment: {}
          topic_partitions: []
            topic_id: uuid
            topic_name: string
            partitions: [int32]
      authorized_operations: int32 =-2147483648
""")

api(78, "ShareFetch", "1-2", flexible="0+",
    request="""
    group_id: string null:0+ =null
    member_id: string null:0+
    share_session_epoch: int32
    max_wait_ms: int32
    min_bytes: int32
    max_bytes: int32 =0x7fffffff
    max_records: int32 1+
    batch_size: int32 1+
    share_acquire_mode: int8 2+ =0
    is_renew_ack: bool 2+ =false
    topics: []
      topic_id: uuid
      partitions: []
        partition_index: int32
        acknowledgement_batches: []
          first_offset: int64
          last_offset: int64
          acknowledge_types: [int8]
    forgotten_topics_data: []
      topic_id: uuid
      partitions: [int32]
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    acquisition_lock_timeout_ms: int32
    responses: []
      topic_id: uuid
      partitions: []
        partition_index: int32
        error_code: int16
        error_message: string null:0+ =null
        acknowledge_error_code: int16
        acknowledge_error_message: string null:0+ =null
        current_leader: {}
          leader_id: int32
          leader_epoch: int32
        records: records null:0+
        acquired_records: []
          first_offset: int64
          last_offset: int64
          delivery_count: int16
    node_endpoints: []
      node_id: int32
      host: string
      port: int32
      rack: string null:0+ =null
""")

api(79, "ShareAcknowledge", "1-2", flexible="0+",
    request="""
    group_id: string null:0+ =null
    member_id: string null:0+
    share_session_epoch: int32
    is_renew_ack: bool 2+ =false
    topics: []
      topic_id: uuid
      partitions: []
        partition_index: int32
        acknowledgement_batches: []
          first_offset: int64
          last_offset: int64
          acknowledge_types: [int8]
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    acquisition_lock_timeout_ms: int32 2+
    responses: []
      topic_id: uuid
      partitions: []
        partition_index: int32
        error_code: int16
        error_message: string null:0+ =null
        current_leader: {}
          leader_id: int32
          leader_epoch: int32
    node_endpoints: []
      node_id: int32
      host: string
      port: int32
      rack: string null:0+ =null
""")

# KIP-1071 streams groups (Kafka 4.2+); see docs/design/streams-groups.md
api(88, "StreamsGroupHeartbeat", "0", flexible="0+",
    request="""
    group_id: string
    member_id: string
    member_epoch: int32
    endpoint_information_epoch: int32
    instance_id: string null:0+ =null
    rack_id: string null:0+ =null
    rebalance_timeout_ms: int32 =-1
    topology: {} null:0+ =null
      epoch: int32
      subtopologies: []
        subtopology_id: string
        source_topics: [string]
        source_topic_regex: [string]
        state_changelog_topics: []
          name: string
          partitions: int32
          replication_factor: int16
          topic_configs: []
            key: string
            value: string
        repartition_sink_topics: [string]
        repartition_source_topics: []
          name: string
          partitions: int32
          replication_factor: int16
          topic_configs: []
            key: string
            value: string
        copartition_groups: []
          source_topics: [int16]
          source_topic_regex: [int16]
          repartition_source_topics: [int16]
    active_tasks: [] null:0+ =null
      subtopology_id: string
      partitions: [int32]
    standby_tasks: [] null:0+ =null
      subtopology_id: string
      partitions: [int32]
    warmup_tasks: [] null:0+ =null
      subtopology_id: string
      partitions: [int32]
    process_id: string null:0+ =null
    user_endpoint: {} null:0+ =null
      host: string
      port: uint16
    client_tags: [] null:0+ =null
      key: string
      value: string
    task_offsets: [] null:0+ =null
      subtopology_id: string
      partition: int32
      offset: int64
    task_end_offsets: [] null:0+ =null
      subtopology_id: string
      partition: int32
      offset: int64
    shutdown_application: bool =false
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    member_id: string
    member_epoch: int32
    heartbeat_interval_ms: int32
    acceptable_recovery_lag: int32
    task_offset_interval_ms: int32
    status: [] null:0+ =null
      status_code: int8
      status_detail: string
    active_tasks: [] null:0+ =null
      subtopology_id: string
      partitions: [int32]
    standby_tasks: [] null:0+ =null
      subtopology_id: string
      partitions: [int32]
    warmup_tasks: [] null:0+ =null
      subtopology_id: string
      partitions: [int32]
    endpoint_information_epoch: int32
    partitions_by_user_endpoint: [] null:0+ =null
      user_endpoint: {}
        host: string
        port: uint16
      active_partitions: []
        topic: string
        partitions: [int32]
      standby_partitions: []
        topic: string
        partitions: [int32]
""")

api(89, "StreamsGroupDescribe", "0", flexible="0+",
    request="""
    group_ids: [string]
    include_authorized_operations: bool
""",
    response="""
    throttle_time_ms: int32
    groups: []
      error_code: int16
      error_message: string null:0+ =null
      group_id: string
      group_state: string
      group_epoch: int32
      assignment_epoch: int32
      topology: {} null:0+ =null
        epoch: int32
        subtopologies: [] null:0+ =null
          subtopology_id: string
          source_topics: [string]
          repartition_sink_topics: [string]
          state_changelog_topics: []
            name: string
            partitions: int32
            replication_factor: int16
            topic_configs: []
              key: string
              value: string
          repartition_source_topics: []
            name: string
            partitions: int32
            replication_factor: int16
            topic_configs: []
              key: string
              value: string
      members: []
        member_id: string
        member_epoch: int32
        instance_id: string null:0+ =null
        rack_id: string null:0+ =null
        client_id: string
        client_host: string
        topology_epoch: int32
        process_id: string
        user_endpoint: {} null:0+ =null
          host: string
          port: uint16
        client_tags: []
          key: string
          value: string
        task_offsets: []
          subtopology_id: string
          partition: int32
          offset: int64
        task_end_offsets: []
          subtopology_id: string
          partition: int32
          offset: int64
        assignment: {}
          active_tasks: []
            subtopology_id: string
            partitions: [int32]
          standby_tasks: []
            subtopology_id: string
            partitions: [int32]
          warmup_tasks: []
            subtopology_id: string
            partitions: [int32]
        target_assignment: {}
          active_tasks: []
            subtopology_id: string
            partitions: [int32]
          standby_tasks: []
            subtopology_id: string
            partitions: [int32]
          warmup_tasks: []
            subtopology_id: string
            partitions: [int32]
        is_classic: bool
      authorized_operations: int32 =-2147483648
""")

api(90, "DescribeShareGroupOffsets", "0-1", flexible="0+",
    request="""
    groups: []
      group_id: string
      topics: [] null:0+
        topic_name: string
        partitions: [int32]
""",
    response="""
    throttle_time_ms: int32
    groups: []
      group_id: string
      topics: []
        topic_name: string
        topic_id: uuid
        partitions: []
          partition_index: int32
          start_offset: int64
          leader_epoch: int32
          lag: int64 1+ =-1
          error_code: int16
          error_message: string null:0+ =null
      error_code: int16
      error_message: string null:0+ =null
""")

api(91, "AlterShareGroupOffsets", "0", flexible="0+",
    request="""
    group_id: string
    topics: []
      topic_name: string
      partitions: []
        partition_index: int32
        start_offset: int64
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    responses: []
      topic_name: string
      topic_id: uuid
      partitions: []
        partition_index: int32
        error_code: int16
        error_message: string null:0+ =null
""")

api(92, "DeleteShareGroupOffsets", "0", flexible="0+",
    request="""
    group_id: string
    topics: []
      topic_name: string
""",
    response="""
    throttle_time_ms: int32
    error_code: int16
    error_message: string null:0+ =null
    responses: []
      topic_name: string
      topic_id: uuid
      error_code: int16
      error_message: string null:0+ =null
""")
