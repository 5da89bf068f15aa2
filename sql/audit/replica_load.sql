-- replica_load: per dispatcher replica, its leases in flight now and its leases over the last
-- minute (view audit_replica_load). Lists replicas with a lease in flight or in the last hour.
SELECT coalesce(f.replica, l.replica) AS replica,
       coalesce(f.in_flight, 0) AS in_flight,
       f.next_deadline,
       coalesce(l.leases_last_minute, 0) AS leases_last_minute,
       l.last_leased_at
FROM (
    SELECT replica, count(*) AS in_flight, min(deadline) AS next_deadline
    FROM dispatch
    WHERE state = 'in_flight'
    GROUP BY replica
) f
FULL JOIN (
    SELECT replica,
           count(*) FILTER (WHERE leased_at > now() - interval '1 minute') AS leases_last_minute,
           max(leased_at) AS last_leased_at
    FROM attempts
    WHERE leased_at > now() - interval '1 hour'
    GROUP BY replica
) l ON l.replica = f.replica
ORDER BY 1;
