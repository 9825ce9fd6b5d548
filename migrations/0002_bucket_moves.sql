CREATE TABLE `bucket_moves` (
	`bucket` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`binding` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `session_events_session_id_idx` ON `session_events` (`session_id`);