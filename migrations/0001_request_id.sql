ALTER TABLE `session_events` ADD `request_id` text;--> statement-breakpoint
CREATE UNIQUE INDEX `session_events_request_id_session_id_idx` ON `session_events` (`request_id`,`session_id`);