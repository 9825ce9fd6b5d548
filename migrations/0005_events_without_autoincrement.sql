PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_session_events` (
	`id` integer PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`type` text NOT NULL,
	`session_id` text NOT NULL,
	`actor_session_id` text,
	`ip_address` text,
	`created_at` integer NOT NULL,
	`request_id` text,
	`reason` text,
	`device_key` text,
	`new_device` integer,
	`pending_delivery` integer DEFAULT false NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_session_events`("id", "user_id", "type", "session_id", "actor_session_id", "ip_address", "created_at", "request_id", "reason", "device_key", "new_device", "pending_delivery") SELECT "id", "user_id", "type", "session_id", "actor_session_id", "ip_address", "created_at", "request_id", "reason", "device_key", "new_device", "pending_delivery" FROM `session_events`;--> statement-breakpoint
DROP TABLE `session_events`;--> statement-breakpoint
ALTER TABLE `__new_session_events` RENAME TO `session_events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `session_events_pending_idx` ON `session_events` (`id`) WHERE "session_events"."pending_delivery" = 1;--> statement-breakpoint
DROP INDEX `sessions_last_active_at_idx`;