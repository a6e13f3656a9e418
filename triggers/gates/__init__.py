"""Gates (SPEC §13): keyed state in the database that holds or drops work - a batch
(``batches``)."""
