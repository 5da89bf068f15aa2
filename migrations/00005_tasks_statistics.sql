-- The lease path picks TODO tasks through the partial index tasks_todo; the planner only keeps
-- choosing it when its statistics follow the statuses as they move, so tasks is analyzed often.

-- +goose Up
ALTER TABLE tasks SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05,
                       autovacuum_vacuum_cost_delay = 0);
ALTER TABLE attempts SET (autovacuum_analyze_scale_factor = 0.05);

-- +goose Down
ALTER TABLE attempts RESET (autovacuum_analyze_scale_factor);
ALTER TABLE tasks RESET (autovacuum_analyze_scale_factor, autovacuum_vacuum_scale_factor,
                         autovacuum_vacuum_cost_delay);
