-- tasks_by_status and tasks_by_type took an entry for every version of every row: a claim and a
-- completion each wrote to both. The task list never read them (its filters are optional
-- parameters, so it walks the table in id order and stops once its page is full); only the counts'
-- full scan did, as a smaller thing to scan than the table, and a claim's plan could have picked
-- them where no claim index is named (claim.ts). Without them, measured with bench:peers (20,000
-- tasks, 3 alternated pairs): the drain rose 21 %, and the worker's CPU per task (SQLite runs in
-- it) fell 17 %.
DROP INDEX tasks_by_status;
DROP INDEX tasks_by_type;
