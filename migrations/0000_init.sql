CREATE TABLE `session_events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`user_id` text NOT NULL,
	`type` text NOT NULL,
	`session_id` text NOT NULL,
	`actor_session_id` text,
	`ip_address` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `session_events_user_id_created_at_idx` ON `session_events` (`user_id`,`created_at`);--> statement-breakpoint
CREATE INDEX `session_events_created_at_idx` ON `session_events` (`created_at`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`secret_hash` text NOT NULL,
	`user_id` text NOT NULL,
	`ip_address` text,
	`user_agent` text NOT NULL,
	`browser` text,
	`os` text,
	`device_type` text NOT NULL,
	`country` text,
	`city` text,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`last_active_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sessions_user_id_expires_at_idx` ON `sessions` (`user_id`,`expires_at`);--> statement-breakpoint
CREATE INDEX `sessions_expires_at_idx` ON `sessions` (`expires_at`);--> statement-breakpoint
CREATE INDEX `sessions_last_active_at_idx` ON `sessions` (`last_active_at`);