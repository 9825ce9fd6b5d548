ALTER TABLE `session_events` ADD `request_id` text;--> statement-breakpoint
ALTER TABLE `session_events` ADD `reason` text;--> statement-breakpoint
ALTER TABLE `session_events` ADD `device_key` text;--> statement-breakpoint
ALTER TABLE `session_events` ADD `new_device` integer;--> statement-breakpoint
ALTER TABLE `session_events` ADD `pending_delivery` integer DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX `session_events_user_id_device_key_idx` ON `session_events` (`user_id`,`device_key`,`created_at`);--> statement-breakpoint
CREATE INDEX `session_events_pending_idx` ON `session_events` (`id`) WHERE "session_events"."pending_delivery" = 1;--> statement-breakpoint
ALTER TABLE `sessions` ADD `ttl_seconds` integer;--> statement-breakpoint
ALTER TABLE `sessions` ADD `device_key` text;